//! Produce (key 0), v3-13: appends one record batch per partition to the in-memory logs.
//!
//! Topics are named below v13 and identified by id from v13; an unknown name is
//! UNKNOWN_TOPIC_OR_PARTITION (Produce never creates topics, as in Kafka), an unknown id
//! UNKNOWN_TOPIC_ID, a partition the topic lacks UNKNOWN_TOPIC_OR_PARTITION. Each partition's
//! records are validated on their own ([`crate::log::batch`]), the records decoded as Kafka does
//! (a compressed batch may decompress to `socket.request.max.bytes` at most); a refusal affects
//! that partition only.
//!
//! - acks 0: no response ([`Outcome::Silent`]); but if any partition failed, the connection is
//!   closed, as Kafka does, so that the producer notices and refreshes its metadata.
//! - acks 1 and -1: answered once the batches are appended (one replica: in-sync at once).
//! - any other acks: INVALID_REQUIRED_ACKS for every partition that got that far.
//! - transactional batches: the request must name a transactional id (Kafka answers
//!   TRANSACTIONAL_ID_AUTHORIZATION_FAILED for the whole request otherwise), and each partition
//!   must be in that id's open transaction under the batch's producer id and epoch, checked with
//!   the transaction coordinator as Kafka 4.x verifies it (KIP-890 part 1, errors as its
//!   `AddPartitionsToTxnManager` and `ReplicaManager` translate them): a partition not added is
//!   TRANSACTION_ABORTABLE from v11 (INVALID_TXN_STATE before), a fenced epoch
//!   INVALID_PRODUCER_EPOCH, another producer id INVALID_PRODUCER_ID_MAPPING, a transaction
//!   being completed (or ids still loading) NOT_ENOUGH_REPLICAS, which clients retry. From v12
//!   (transaction version 2) the partitions are first added to the transaction, as Kafka's
//!   partition leader adds them with AddPartitionsToTxn v5 ([`add_implicitly`]), with the same
//!   translation of a refusal.
//!
//! A partition listed twice (in one topic entry, or in two entries for the same topic) is
//! appended once, with the data listed last, and answered once: Kafka collects the request's
//! partitions in a map keyed by topic and partition.
//!
//! A success reports the base offset (the original one for an idempotent retry),
//! `log_append_time_ms` -1 (CreateTime) and, from v5, the log start offset. `record_errors` stays
//! empty and `error_message` null, as Kafka leaves them outside per-record validation.

use std::collections::HashMap;

use kafka_protocol::messages::produce_request::TopicProduceData;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::ResponseError;

use super::context::RequestContext;
use crate::api::Outcome;
use crate::broker::Broker;
use crate::log::batch::{any_transactional, validate_produce_within, BatchHeader};
use crate::log::Appended;
use crate::security::acl::{Operation, ResourceType};
use crate::transactions::ShellError;
use crate::txn::{Member, ProducerIdAndEpoch, TxnError};
use crate::vocab::TopicPartition;

fn partition_response(
    index: i32,
    result: Result<Appended, ResponseError>,
    version: i16,
) -> PartitionProduceResponse {
    let base = PartitionProduceResponse::default()
        .with_index(index)
        .with_log_append_time_ms(-1);
    match result {
        Ok(a) => {
            let mut r = base
                .with_base_offset(a.base_offset)
                .with_log_append_time_ms(a.log_append_time);
            if version >= 5 {
                r.log_start_offset = a.log_start_offset;
            }
            r
        }
        Err(e) => base.with_error_code(e.code()).with_base_offset(-1),
    }
}

/// The request's topics with each (topic, partition) once: a later entry replaces the data of
/// an earlier one and keeps its place, as Kafka's map of partitions does.
fn merge_duplicates(topic_data: Vec<TopicProduceData>) -> Vec<TopicProduceData> {
    let mut merged: Vec<TopicProduceData> = Vec::with_capacity(topic_data.len());
    let mut topics = HashMap::new();
    let mut partitions: HashMap<(usize, i32), usize> = HashMap::new();
    for mut t in topic_data {
        let data = std::mem::take(&mut t.partition_data);
        let ti = *topics
            .entry((t.name.clone(), t.topic_id))
            .or_insert_with(|| {
                merged.push(t);
                merged.len() - 1
            });
        for p in data {
            let slot = &mut merged[ti].partition_data;
            match partitions.get(&(ti, p.index)) {
                Some(&pi) => slot[pi] = p,
                None => {
                    partitions.insert((ti, p.index), slot.len());
                    slot.push(p);
                }
            }
        }
    }
    merged
}

/// The Produce error for a transactional batch its producer may not write now (see the module
/// doc): the coordinator's refusal as Kafka's `AddPartitionsToTxnManager` and `ReplicaManager`
/// translate it.
fn txn_refusal(e: ShellError, version: i16) -> ResponseError {
    match e {
        ShellError::Txn(TxnError::NotInTransaction) if version >= 11 => {
            ResponseError::TransactionAbortable
        }
        ShellError::Txn(TxnError::NotInTransaction | TxnError::InvalidTxnState) => {
            ResponseError::InvalidTxnState
        }
        ShellError::Txn(TxnError::ProducerFenced) => ResponseError::InvalidProducerEpoch,
        ShellError::Txn(TxnError::InvalidProducerIdMapping | TxnError::InvalidRequest) => {
            ResponseError::InvalidProducerIdMapping
        }
        _ => ResponseError::NotEnoughReplicas,
    }
}

/// Whether the transactional batch's producer may write to `tp` now.
fn verify(
    broker: &Broker,
    transactional_id: &str,
    header: &BatchHeader,
    tp: &TopicPartition,
    version: i16,
) -> Result<(), ResponseError> {
    broker
        .txns
        .verify(transactional_id, producer_of(header), Member::Partition(tp))
        .map_err(|e| txn_refusal(e, version))
}

fn producer_of(header: &BatchHeader) -> ProducerIdAndEpoch {
    ProducerIdAndEpoch {
        producer_id: header.producer_id,
        epoch: header.producer_epoch,
    }
}

/// The refusals of transaction version 2's implicit adds, by producer.
type Refusals = HashMap<ProducerIdAndEpoch, ResponseError>;

/// Produce v12+ (transaction version 2): the partitions a transactional batch goes to join
/// the producer's transaction before anything is appended, as Kafka's partition leader adds
/// them through `AddPartitionsToTxnManager` (AddPartitionsToTxn v5, not verify-only); a
/// transaction that is not open is opened. One durable add per producer of the request; a
/// partition already in the open transaction adds nothing. What cannot be resolved or parsed
/// here is refused by the append that follows.
async fn add_implicitly(
    broker: &Broker,
    ctx: &RequestContext,
    transactional_id: &str,
    topics: &[TopicProduceData],
    version: i16,
) -> Refusals {
    let mut wanted: HashMap<ProducerIdAndEpoch, Vec<TopicPartition>> = HashMap::new();
    for t in topics {
        let Ok(topic) = super::resolve_topic_for(
            broker,
            ctx,
            Operation::Write,
            version >= 13,
            t.topic_id,
            &t.name,
        ) else {
            continue;
        };
        for p in &t.partition_data {
            let Some(header) = p.records.as_deref().and_then(BatchHeader::parse) else {
                continue;
            };
            let tp = TopicPartition::new(topic.name.as_str(), p.index);
            // Already in the open transaction: nothing to add, and no store round trip.
            let member = Member::Partition(&tp);
            if header.is_transactional()
                && broker
                    .txns
                    .verify(transactional_id, producer_of(&header), member)
                    .is_err()
            {
                wanted.entry(producer_of(&header)).or_default().push(tp);
            }
        }
    }
    let mut refused = Refusals::new();
    for (producer, partitions) in wanted {
        if let Err(e) = broker
            .txns
            .add_partitions(transactional_id, producer, &partitions)
            .await
        {
            refused.insert(producer, txn_refusal(e, version));
        }
    }
    refused
}

/// Answers one Produce request.
pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: ProduceRequest,
    version: i16,
) -> Outcome {
    let acks = req.acks;
    let transactional_id = req.transactional_id.as_deref().map(|t| t.to_string());
    // As Kafka: a transactional id needs WRITE on it, then each topic needs WRITE.
    let txn_denied = transactional_id
        .as_deref()
        .is_some_and(|id| !ctx.may(broker, Operation::Write, ResourceType::TransactionalId, id));
    let whole_request_error = (txn_denied
        || (transactional_id.is_none()
            && req
                .topic_data
                .iter()
                .flat_map(|t| &t.partition_data)
                .any(|p| p.records.as_deref().is_some_and(any_transactional))))
    .then_some(ResponseError::TransactionalIdAuthorizationFailed);
    let topic_data = merge_duplicates(req.topic_data);
    let refused = match (&transactional_id, whole_request_error) {
        (Some(id), None) if version >= 12 && matches!(acks, -1..=1) => {
            add_implicitly(broker, ctx, id, &topic_data, version).await
        }
        _ => Refusals::new(),
    };
    let mut failed = false;
    let responses = topic_data
        .into_iter()
        .map(|t| {
            let topic = super::resolve_topic_for(
                broker,
                ctx,
                Operation::Write,
                version >= 13,
                t.topic_id,
                &t.name,
            );
            let partitions = t
                .partition_data
                .iter()
                .map(|p| {
                    let result = whole_request_error.map_or(Ok(()), Err).and_then(|()| {
                        let topic = topic.as_ref().map_err(|e| *e)?;
                        if crate::metadata::is_internal(&topic.name) {
                            // Kafka's "Cannot append to internal topic": only the
                            // coordinators write them.
                            return Err(ResponseError::InvalidTopicException);
                        }
                        let partition = broker
                            .logs
                            .partition(topic, p.index)
                            .ok_or(ResponseError::UnknownTopicOrPartition)?;
                        let records = p.records.as_deref().unwrap_or_default();
                        let batch = validate_produce_within(
                            records,
                            version,
                            broker.config.socket_request_max_bytes,
                        )
                        .map_err(|e| {
                            tracing::debug!(topic = topic.name, partition = p.index, error = %e, "produce refused");
                            e.code()
                        })?;
                        if !matches!(acks, -1..=1) {
                            return Err(ResponseError::InvalidRequiredAcks);
                        }
                        if batch.header.is_transactional() {
                            if let Some(e) = refused.get(&producer_of(&batch.header)) {
                                return Err(*e);
                            }
                            let tp = TopicPartition::new(topic.name.as_str(), p.index);
                            verify(broker, transactional_id.as_deref().unwrap_or_default(), &batch.header, &tp, version)?;
                        }
                        partition.append(&batch).map_err(|e| {
                            tracing::debug!(topic = topic.name, partition = p.index, error = %e, "append refused");
                            e.code()
                        })
                    });
                    failed |= result.is_err();
                    partition_response(p.index, result, version)
                })
                .collect();
            let entry = TopicProduceResponse::default().with_partition_responses(partitions);
            if version >= 13 {
                entry.with_topic_id(t.topic_id)
            } else {
                entry.with_name(t.name)
            }
        })
        .collect();
    if acks == 0 {
        return if failed {
            Outcome::Close
        } else {
            Outcome::Silent
        };
    }
    Outcome::Respond(Box::new(kafka_protocol::messages::ResponseKind::Produce(
        ProduceResponse::default().with_responses(responses),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::broker;
    use crate::log::batch::tests::{batch, simple, transactional, Spec};
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ResponseKind, TopicName};
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn request(
        topic: &str,
        partitions: &[(i32, Option<Bytes>)],
        acks: i16,
        version: i16,
    ) -> ProduceRequest {
        let mut t = TopicProduceData::default().with_partition_data(
            partitions
                .iter()
                .map(|(i, r)| {
                    PartitionProduceData::default()
                        .with_index(*i)
                        .with_records(r.clone())
                })
                .collect(),
        );
        if version >= 13 {
            t.topic_id = crate::metadata::name_based_id(topic);
        } else {
            t.name = TopicName(StrBytes::from_string(topic.into()));
        }
        ProduceRequest::default()
            .with_acks(acks)
            .with_timeout_ms(1000)
            .with_topic_data(vec![t])
    }

    async fn answer(broker: &Broker, req: ProduceRequest, version: i16) -> ProduceResponse {
        match handle(broker, &crate::api::testing::ctx(broker), req, version).await {
            Outcome::Respond(r) => match *r {
                ResponseKind::Produce(p) => p,
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    fn parts(resp: &ProduceResponse) -> Vec<(i32, i16, i64)> {
        resp.responses
            .iter()
            .flat_map(|t| &t.partition_responses)
            .map(|p| (p.index, p.error_code, p.base_offset))
            .collect()
    }

    #[tokio::test]
    async fn encodes_at_every_served_version() {
        let b = broker();
        for v in 3..=13 {
            let req = request(
                "t",
                &[
                    (0, Some(simple(2))),
                    (1, Some(Bytes::from_static(b"junk"))),
                    (7, None),
                ],
                -1,
                v,
            );
            let resp = answer(&b, req, v).await;
            let got = parts(&resp);
            assert_eq!(got[0].1, 0, "v{v}");
            assert_eq!(got[1].1, ResponseError::CorruptMessage.code(), "v{v}");
            assert_eq!(
                got[2].1,
                ResponseError::UnknownTopicOrPartition.code(),
                "v{v}"
            );
            let mut buf = BytesMut::new();
            resp.encode(&mut buf, v)
                .unwrap_or_else(|e| panic!("v{v}: {e}"));
        }
        assert_eq!(
            b.logs
                .partition(&b.topics.get("t").unwrap(), 0)
                .unwrap()
                .lock()
                .log_end_offset(),
            22
        );
    }

    #[tokio::test]
    async fn offsets_and_unknown_topics() {
        let b = broker();
        let r = answer(&b, request("t", &[(0, Some(simple(3)))], 1, 9), 9).await;
        assert_eq!(parts(&r), vec![(0, 0, 0)]);
        let p = &r.responses[0].partition_responses[0];
        assert_eq!((p.log_append_time_ms, p.log_start_offset), (-1, 0));
        let r = answer(&b, request("t", &[(0, Some(simple(3)))], 1, 9), 9).await;
        assert_eq!(parts(&r), vec![(0, 0, 3)]);
        let r = answer(&b, request("nope", &[(0, Some(simple(1)))], 1, 9), 9).await;
        assert_eq!(
            parts(&r),
            vec![(0, ResponseError::UnknownTopicOrPartition.code(), -1)]
        );
        assert!(
            b.topics.get("nope").is_none(),
            "produce does not create topics"
        );
        let r = answer(&b, request("nope", &[(0, Some(simple(1)))], 1, 13), 13).await;
        assert_eq!(
            parts(&r),
            vec![(0, ResponseError::UnknownTopicId.code(), -1)]
        );
        let r = answer(&b, request("t", &[(1, Some(simple(1)))], 1, 13), 13).await;
        assert_eq!(parts(&r), vec![(1, 0, 0)]);
    }

    #[tokio::test]
    async fn transactional_records_need_their_partition_in_the_open_transaction() {
        use crate::txn::InitProducer;
        let b = broker();
        let init = InitProducer {
            transactional_id: "tx".into(),
            timeout_ms: 60_000,
            expected: None,
        };
        let p = b.txns.init_producer(&b, &init).await.unwrap();
        let records = || {
            batch(Spec {
                records: 1,
                producer_id: p.producer_id,
                producer_epoch: p.epoch,
                base_sequence: 0,
                transactional: true,
                ..Spec::default()
            })
        };
        let with_id = |v: i16| {
            request("t", &[(0, Some(records()))], -1, v).with_transactional_id(Some(
                kafka_protocol::messages::TransactionalId(StrBytes::from_static_str("tx")),
            ))
        };
        let code = |r: ProduceResponse| parts(&r)[0].1;
        assert_eq!(
            code(answer(&b, with_id(11), 11).await),
            ResponseError::TransactionAbortable.code()
        );
        assert_eq!(
            code(answer(&b, with_id(10), 10).await),
            ResponseError::InvalidTxnState.code()
        );
        b.txns
            .add_partitions("tx", p, &[TopicPartition::new("t", 0)])
            .await
            .unwrap();
        assert_eq!(parts(&answer(&b, with_id(9), 9).await), vec![(0, 0, 0)]);
        let topic = b.topics.get("t").unwrap();
        let log = b.logs.partition(&topic, 0).unwrap();
        assert_eq!(log.lock().last_stable_offset(), 0, "open until its marker");
        let end = crate::txn::EndTxn {
            transactional_id: "tx",
            producer: p,
            commit: true,
            tv2: false,
        };
        b.txns.end_txn(&b, &end).await.unwrap();
        assert_eq!(
            log.lock().last_stable_offset(),
            2,
            "the record and the marker"
        );
    }

    #[tokio::test]
    async fn from_v12_a_transactional_batch_adds_its_partition_to_the_transaction() {
        use crate::txn::{EndTxn, InitProducer};
        use crate::vocab::TxnState;
        let b = broker();
        let init = InitProducer {
            transactional_id: "tx".into(),
            timeout_ms: 60_000,
            expected: None,
        };
        let p = b.txns.init_producer(&b, &init).await.unwrap();
        let produce = |epoch: i16, partition: i32, sequence: i32, v: i16| {
            let records = batch(Spec {
                records: 1,
                producer_id: p.producer_id,
                producer_epoch: epoch,
                base_sequence: sequence,
                transactional: true,
                ..Spec::default()
            });
            request("t", &[(partition, Some(records))], -1, v).with_transactional_id(Some(
                kafka_protocol::messages::TransactionalId(StrBytes::from_static_str("tx")),
            ))
        };
        let code = |r: ProduceResponse| parts(&r)[0].1;
        assert_eq!(
            code(answer(&b, produce(p.epoch, 0, 0, 12), 12).await),
            0,
            "no AddPartitionsToTxn: the produce adds it"
        );
        let described = b.txns.describe("tx").unwrap();
        assert_eq!(described.state, TxnState::Ongoing);
        assert_eq!(described.partitions, vec![TopicPartition::new("t", 0)]);
        assert_eq!(code(answer(&b, produce(p.epoch, 1, 0, 13), 13).await), 0);
        assert_eq!(b.txns.describe("tx").unwrap().partitions.len(), 2);
        assert_eq!(
            code(answer(&b, produce(p.epoch + 1, 0, 0, 12), 12).await),
            ResponseError::InvalidProducerEpoch.code(),
            "an epoch the coordinator does not know"
        );
        let end = EndTxn {
            transactional_id: "tx",
            producer: p,
            commit: true,
            tv2: true,
        };
        let next = b.txns.end_txn(&b, &end).await.unwrap();
        assert_eq!(next.epoch, p.epoch + 1);
        assert_eq!(
            code(answer(&b, produce(p.epoch, 0, 1, 12), 12).await),
            ResponseError::InvalidProducerEpoch.code(),
            "the old epoch is fenced"
        );
        assert_eq!(
            code(answer(&b, produce(next.epoch, 0, 0, 12), 12).await),
            0,
            "the next transaction at the bumped epoch, sequences from 0"
        );
        assert_eq!(
            code(answer(&b, produce(next.epoch, 1, 0, 11), 11).await),
            ResponseError::TransactionAbortable.code(),
            "below v12 nothing is added implicitly"
        );
    }

    #[tokio::test]
    async fn a_partition_listed_twice_is_appended_once_with_the_later_data() {
        let b = broker();
        let mut req = request("t", &[(0, Some(simple(2))), (1, Some(simple(1)))], 1, 9);
        req.topic_data[0].partition_data.push(
            PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(simple(5))),
        );
        let again = request("t", &[(1, Some(simple(3)))], 1, 9);
        req.topic_data.extend(again.topic_data);
        let r = answer(&b, req, 9).await;
        assert_eq!(r.responses.len(), 1, "{r:?}");
        assert_eq!(parts(&r), vec![(0, 0, 0), (1, 0, 0)]);
        let topic = b.topics.get("t").unwrap();
        let end = |i| b.logs.partition(&topic, i).unwrap().lock().log_end_offset();
        assert_eq!((end(0), end(1)), (5, 3));
    }

    #[tokio::test]
    async fn acks_zero_is_silent_and_closes_on_error() {
        let b = broker();
        assert!(matches!(
            handle(
                &b,
                &crate::api::testing::ctx(&b),
                request("t", &[(0, Some(simple(1)))], 0, 9),
                9
            )
            .await,
            Outcome::Silent
        ));
        assert!(matches!(
            handle(
                &b,
                &crate::api::testing::ctx(&b),
                request("t", &[(0, Some(Bytes::from_static(b"x")))], 0, 9),
                9
            )
            .await,
            Outcome::Close
        ));
        let r = answer(&b, request("t", &[(0, Some(simple(1)))], 2, 9), 9).await;
        assert_eq!(
            parts(&r),
            vec![(0, ResponseError::InvalidRequiredAcks.code(), -1)]
        );
    }

    #[tokio::test]
    async fn transactional_records_without_a_transactional_id_fail_the_whole_request() {
        let b = broker();
        let t = transactional();
        let r = answer(
            &b,
            request("t", &[(0, Some(simple(1))), (1, Some(t))], 1, 9),
            9,
        )
        .await;
        let code = ResponseError::TransactionalIdAuthorizationFailed.code();
        assert_eq!(parts(&r), vec![(0, code, -1), (1, code, -1)]);
        let topic = b.topics.get("t").unwrap();
        assert_eq!(
            b.logs.partition(&topic, 0).unwrap().lock().log_end_offset(),
            0
        );
    }

    #[tokio::test]
    async fn idempotent_retry_is_acknowledged_with_its_offset() {
        let b = broker();
        answer(&b, request("t", &[(0, Some(simple(2)))], -1, 9), 9).await;
        let idem = batch(Spec {
            records: 4,
            producer_id: 10,
            producer_epoch: 0,
            base_sequence: 0,
            ..Spec::default()
        });
        for _ in 0..3 {
            let r = answer(&b, request("t", &[(0, Some(idem.clone()))], -1, 9), 9).await;
            assert_eq!(parts(&r), vec![(0, 0, 2)]);
        }
        let gap = batch(Spec {
            producer_id: 10,
            producer_epoch: 0,
            base_sequence: 9,
            ..Spec::default()
        });
        let r = answer(&b, request("t", &[(0, Some(gap))], -1, 9), 9).await;
        assert_eq!(
            parts(&r),
            vec![(0, ResponseError::OutOfOrderSequenceNumber.code(), -1)]
        );
        let topic = b.topics.get("t").unwrap();
        assert_eq!(
            b.logs.partition(&topic, 0).unwrap().lock().log_end_offset(),
            6
        );
    }
}
