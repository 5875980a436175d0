//! The OpenTelemetry metrics a client pushes (OTLP `MetricsData`, opentelemetry-proto's
//! `metrics/v1/metrics.proto`), declared for prost with the fields koord reads; the others are
//! skipped as protobuf skips unknown fields. Histograms and summaries are left out (Kafka's
//! clients push gauges and sums).

use prost::Message;

#[derive(Clone, PartialEq, Message)]
pub struct MetricsData {
    #[prost(message, repeated, tag = "1")]
    pub resource_metrics: Vec<ResourceMetrics>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ResourceMetrics {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub scope_metrics: Vec<ScopeMetrics>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Resource {
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ScopeMetrics {
    #[prost(message, repeated, tag = "2")]
    pub metrics: Vec<Metric>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Metric {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "5")]
    pub gauge: Option<Gauge>,
    #[prost(message, optional, tag = "7")]
    pub sum: Option<Sum>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Gauge {
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<NumberDataPoint>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Sum {
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<NumberDataPoint>,
    #[prost(int32, tag = "2")]
    pub aggregation_temporality: i32,
    #[prost(bool, tag = "3")]
    pub is_monotonic: bool,
}

#[derive(Clone, PartialEq, Message)]
pub struct NumberDataPoint {
    #[prost(fixed64, tag = "3")]
    pub time_unix_nano: u64,
    #[prost(oneof = "Number", tags = "4, 6")]
    pub value: Option<Number>,
    #[prost(message, repeated, tag = "7")]
    pub attributes: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Number {
    #[prost(double, tag = "4")]
    AsDouble(f64),
    #[prost(sfixed64, tag = "6")]
    AsInt(i64),
}

#[derive(Clone, PartialEq, Message)]
pub struct KeyValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

#[derive(Clone, PartialEq, Message)]
pub struct AnyValue {
    #[prost(oneof = "Any", tags = "1, 2, 3, 4")]
    pub value: Option<Any>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Any {
    #[prost(string, tag = "1")]
    String(String),
    #[prost(bool, tag = "2")]
    Bool(bool),
    #[prost(int64, tag = "3")]
    Int(i64),
    #[prost(double, tag = "4")]
    Double(f64),
}

impl AnyValue {
    /// The value as text (an attribute's value in a label).
    pub fn text(&self) -> String {
        match &self.value {
            Some(Any::String(s)) => s.clone(),
            Some(Any::Bool(b)) => b.to_string(),
            Some(Any::Int(i)) => i.to_string(),
            Some(Any::Double(d)) => d.to_string(),
            None => String::new(),
        }
    }
}

/// Attributes as `(key, value)` text pairs.
pub fn attributes(kvs: &[KeyValue]) -> Vec<(String, String)> {
    kvs.iter()
        .map(|kv| {
            (
                kv.key.clone(),
                kv.value.as_ref().map(AnyValue::text).unwrap_or_default(),
            )
        })
        .collect()
}

/// One value a client reported: the metric, its data point's attributes, the value.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub name: String,
    pub attributes: Vec<(String, String)>,
    pub value: f64,
}

/// What one push holds: the client's resource attributes (`group_id`, `group_member_id`,
/// `transactional_id`, ...) and its latest data points.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pushed {
    pub resource: Vec<(String, String)>,
    pub points: Vec<Point>,
}

/// Decodes a (decompressed) push.
///
/// # Errors
/// The payload is not an OTLP `MetricsData`.
pub fn decode(payload: &[u8]) -> Result<Pushed, prost::DecodeError> {
    let data = MetricsData::decode(payload)?;
    let mut out = Pushed::default();
    for rm in data.resource_metrics {
        if let Some(r) = &rm.resource {
            for kv in attributes(&r.attributes) {
                if !out.resource.iter().any(|(k, _)| *k == kv.0) {
                    out.resource.push(kv);
                }
            }
        }
        for m in rm.scope_metrics.into_iter().flat_map(|s| s.metrics) {
            let points = m
                .gauge
                .map(|g| g.data_points)
                .into_iter()
                .chain(m.sum.map(|s| s.data_points))
                .flatten();
            for p in points {
                let value = match p.value {
                    Some(Number::AsDouble(d)) => d,
                    Some(Number::AsInt(i)) => i as f64,
                    None => continue,
                };
                out.points.push(Point {
                    name: m.name.clone(),
                    attributes: attributes(&p.attributes),
                    value,
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn kv(k: &str, v: &str) -> KeyValue {
        KeyValue {
            key: k.into(),
            value: Some(AnyValue {
                value: Some(Any::String(v.into())),
            }),
        }
    }

    /// A push as Kafka's Java client encodes one: a resource with the group labels, a gauge and
    /// a sum.
    pub(crate) fn sample(group: &str, member: &str) -> Vec<u8> {
        MetricsData {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(Resource {
                    attributes: vec![kv("group_id", group), kv("group_member_id", member)],
                }),
                scope_metrics: vec![ScopeMetrics {
                    metrics: vec![
                        Metric {
                            name: "org.apache.kafka.consumer.fetch.manager.records.lag.max".into(),
                            gauge: Some(Gauge {
                                data_points: vec![NumberDataPoint {
                                    time_unix_nano: 1,
                                    value: Some(Number::AsDouble(42.0)),
                                    attributes: vec![kv("client_id", "c")],
                                }],
                            }),
                            sum: None,
                        },
                        Metric {
                            name: "org.apache.kafka.consumer.coordinator.commit.total".into(),
                            gauge: None,
                            sum: Some(Sum {
                                data_points: vec![NumberDataPoint {
                                    time_unix_nano: 1,
                                    value: Some(Number::AsInt(7)),
                                    attributes: vec![],
                                }],
                                aggregation_temporality: 2,
                                is_monotonic: true,
                            }),
                        },
                    ],
                }],
            }],
        }
        .encode_to_vec()
    }

    #[test]
    fn a_push_decodes_to_its_resource_and_points() {
        let pushed = decode(&sample("g", "m-1")).unwrap();
        assert_eq!(
            pushed.resource,
            vec![
                ("group_id".to_string(), "g".to_string()),
                ("group_member_id".to_string(), "m-1".to_string())
            ]
        );
        assert_eq!(pushed.points.len(), 2);
        assert_eq!(pushed.points[0].value, 42.0);
        assert_eq!(
            pushed.points[0].attributes,
            vec![("client_id".to_string(), "c".to_string())]
        );
        assert_eq!(pushed.points[1].value, 7.0);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode(&[0xff, 0xff, 0xff]).is_err());
        assert!(decode(&[0x0a, 0x80]).is_err());
        assert_eq!(decode(&[]).unwrap(), Pushed::default());
    }
}
