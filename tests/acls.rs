//! Wire tests of ACLs: CreateAcls (30), DescribeAcls (29) and DeleteAcls (31) with Kafka's
//! filter semantics and errors, and their enforcement (GROUP_AUTHORIZATION_FAILED,
//! TOPIC_AUTHORIZATION_FAILED, a DENY over an ALLOW, Metadata leaving out topics a principal
//! may not describe, the authorized-operations bitfields).
//!
//! Against koord, each test starts koord with a PLAINTEXT and a SASL_PLAINTEXT listener, the
//! SCRAM user `alice`, and Kafka's authorizer set up as `KAFKA_SECURITY=sasl scripts/kafka.sh
//! start` sets up Apache Kafka 4.4: super.users User:ANONYMOUS and User:alice,
//! allow.everyone.if.no.acl.found=true. With `KOORD_BOOTSTRAP` and `KOORD_SASL_BOOTSTRAP` the
//! same tests run against that Kafka. Each test works on resources and users of its own names;
//! Kafka applies ACLs and users through its metadata log, so a test waits until DescribeAcls
//! (and DescribeUserScramCredentials) show a change before relying on it.

mod common;

use std::net::{SocketAddr, ToSocketAddrs};

use bytes::Bytes;
use common::{err, s, topic_name, Client, Koord};
use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, CreateAclsRequest, CreateAclsResponse, CreateTopicsRequest,
    DeleteAclsRequest, DeleteAclsResponse, DescribeAclsRequest, DescribeAclsResponse,
    DescribeGroupsRequest, DescribeUserScramCredentialsRequest, JoinGroupRequest,
    JoinGroupResponse, MetadataRequest, MetadataResponse, OffsetCommitRequest,
};
use kafka_protocol::ResponseError;
use koord::security::scram::ScramMechanism;

const ADMIN: &str = "alice";
const ADMIN_PASSWORD: &str = "alice-secret";
const SASL_ENV: &str = "KOORD_SASL_BOOTSTRAP";

// Kafka's codes (ResourceType, PatternType, AclOperation, AclPermissionType).
const ANY: i8 = 1;
const TOPIC: i8 = 2;
const GROUP: i8 = 3;
const CLUSTER: i8 = 4;
const MATCH: i8 = 2;
const LITERAL: i8 = 3;
const PREFIXED: i8 = 4;
const ALL: i8 = 2;
const READ: i8 = 3;
const ALTER: i8 = 7;
const DESCRIBE: i8 = 8;
const DENY: i8 = 2;
const ALLOW: i8 = 3;

/// The server's SASL_PLAINTEXT listener, and the server.
struct Secured {
    server: Koord,
    sasl: SocketAddr,
}

impl Secured {
    fn start(test: &str) -> Option<Secured> {
        if common::bootstrap().is_some() {
            let Some(sasl) = std::env::var(SASL_ENV).ok().filter(|v| !v.is_empty()) else {
                eprintln!("SKIPPED {test}: {SASL_ENV} names no SASL_PLAINTEXT listener");
                return None;
            };
            let sasl = sasl
                .to_socket_addrs()
                .ok()
                .and_then(|mut a| a.next())
                .expect("KOORD_SASL_BOOTSTRAP resolves");
            return Some(Secured {
                server: Koord::start(&[]),
                sasl,
            });
        }
        let port = common::free_port();
        let server = Koord::spawn_with(move |addr| {
            vec![
                format!("listeners=PLAINTEXT://{addr},SASL_PLAINTEXT://127.0.0.1:{port}"),
                format!("sasl.admin.user={ADMIN}"),
                format!("sasl.admin.password={ADMIN_PASSWORD}"),
                "connection.failed.authentication.delay.ms=0".into(),
                "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer"
                    .into(),
                "super.users=User:ANONYMOUS;User:alice".into(),
                "allow.everyone.if.no.acl.found=true".into(),
                "group.initial.rebalance.delay.ms=0".into(),
            ]
        });
        Some(Secured {
            server,
            sasl: SocketAddr::from(([127, 0, 0, 1], port)),
        })
    }

    /// A connection authenticated with SCRAM-SHA-512.
    fn login(&self, user: &str, password: &str) -> Client {
        let mut c = Client::connect(self.sasl);
        let r = common::sasl::login(&mut c, "SCRAM-SHA-512", user, password);
        assert_eq!(err(r.error_code), None, "{user}: {r:?}");
        c
    }

    fn admin(&self) -> Client {
        self.login(ADMIN, ADMIN_PASSWORD)
    }

    /// A new SCRAM-SHA-512 user (made by the admin), once the server serves it.
    fn user(&self, admin: &mut Client, prefix: &str) -> (String, Client) {
        let user = common::unique(prefix);
        let password = format!("{user}-secret");
        let m = ScramMechanism::Sha512;
        let salt = b"koord-acls-salt".to_vec();
        let salted = m.salted_password(password.as_bytes(), &salt, 4096);
        let r = admin.send(
            0,
            &AlterUserScramCredentialsRequest::default().with_upsertions(vec![
                ScramCredentialUpsertion::default()
                    .with_name(s(&user))
                    .with_mechanism(m.code())
                    .with_iterations(4096)
                    .with_salt(Bytes::from(salt))
                    .with_salted_password(Bytes::from(salted)),
            ]),
        );
        assert_eq!(err(r.results[0].error_code), None, "{r:?}");
        wait_until(&format!("{user} is described"), || {
            let r = admin.send(
                0,
                &DescribeUserScramCredentialsRequest::default()
                    .with_users(Some(vec![UserName::default().with_name(s(&user))])),
            );
            r.results[0].error_code == 0
        });
        let c = self.login(&user, &password);
        (user, c)
    }
}

/// Polls `done` (each poll a request to the server) until it holds, for at most
/// [`common::DEADLINE`].
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + common::DEADLINE;
    while !done() {
        assert!(std::time::Instant::now() < deadline, "{what}: not in time");
        std::thread::yield_now();
    }
}

fn principal(user: &str) -> String {
    format!("User:{user}")
}

fn acl(rt: i8, name: &str, pattern: i8, user: &str, op: i8, permission: i8) -> AclCreation {
    AclCreation::default()
        .with_resource_type(rt)
        .with_resource_name(s(name))
        .with_resource_pattern_type(pattern)
        .with_principal(s(&principal(user)))
        .with_host(s("*"))
        .with_operation(op)
        .with_permission_type(permission)
}

fn create(c: &mut Client, acls: Vec<AclCreation>) -> CreateAclsResponse {
    c.send(3, &CreateAclsRequest::default().with_creations(acls))
}

/// Every ACL of `user`'s principal: (resource type, name, pattern type, operation, permission).
fn acls_of(c: &mut Client, user: &str) -> Vec<(i8, String, i8, i8, i8)> {
    let r: DescribeAclsResponse = c.send(3, &by_principal(user));
    assert_eq!(err(r.error_code), None, "{r:?}");
    let mut out: Vec<_> = r
        .resources
        .iter()
        .flat_map(|res| {
            res.acls.iter().map(move |a| {
                (
                    res.resource_type,
                    res.resource_name.to_string(),
                    res.pattern_type,
                    a.operation,
                    a.permission_type,
                )
            })
        })
        .collect();
    out.sort();
    out
}

fn by_principal(user: &str) -> DescribeAclsRequest {
    DescribeAclsRequest::default()
        .with_resource_type_filter(ANY)
        .with_resource_name_filter(None)
        .with_pattern_type_filter(ANY)
        .with_principal_filter(Some(s(&principal(user))))
        .with_host_filter(None)
        .with_operation(ANY)
        .with_permission_type(ANY)
}

/// Creates `acls` (all of `user`, without errors) and waits until the server enforces them.
fn grant(c: &mut Client, user: &str, acls: Vec<AclCreation>) {
    let want = acls.len() + acls_of(c, user).len();
    let r = create(c, acls);
    for result in &r.results {
        assert_eq!(err(result.error_code), None, "{r:?}");
    }
    wait_until("the ACLs are in force", || acls_of(c, user).len() == want);
}

fn join(c: &mut Client, group: &str) -> JoinGroupResponse {
    c.send(
        5,
        &JoinGroupRequest::default()
            .with_group_id(common::group_id(group))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            // A protocol koord leaves to the client, so empty metadata is fine on both servers.
            .with_protocol_type(s("acl-test"))
            .with_protocols(vec![
                kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol::default()
                    .with_name(s("range"))
                    .with_metadata(Bytes::new()),
            ]),
    )
}

#[test]
fn acls_are_created_described_matched_and_deleted() {
    let Some(server) = Secured::start("acls_crud") else {
        return;
    };
    let mut admin = server.admin();
    let user = common::unique("acl-crud");
    let group = common::unique("crud-group");
    let prefix = common::unique("crud-topic");
    grant(
        &mut admin,
        &user,
        vec![
            acl(GROUP, &group, LITERAL, &user, READ, ALLOW),
            acl(TOPIC, &prefix, PREFIXED, &user, DESCRIBE, ALLOW),
        ],
    );
    // Creating an ACL that exists changes nothing.
    let r = create(
        &mut admin,
        vec![acl(GROUP, &group, LITERAL, &user, READ, ALLOW)],
    );
    assert_eq!(err(r.results[0].error_code), None);
    assert_eq!(
        acls_of(&mut admin, &user),
        vec![
            (TOPIC, prefix.clone(), PREFIXED, DESCRIBE, ALLOW),
            (GROUP, group.clone(), LITERAL, READ, ALLOW),
        ]
    );
    // MATCH finds the prefixed ACL for a topic it covers; LITERAL does not.
    let matching = |c: &mut Client, pattern: i8| -> usize {
        let r: DescribeAclsResponse = c.send(
            3,
            &by_principal(&user)
                .with_resource_type_filter(TOPIC)
                .with_resource_name_filter(Some(s(&format!("{prefix}-orders"))))
                .with_pattern_type_filter(pattern),
        );
        assert_eq!(err(r.error_code), None, "{r:?}");
        r.resources.len()
    };
    assert_eq!(matching(&mut admin, MATCH), 1);
    assert_eq!(matching(&mut admin, LITERAL), 0);
    // Bad bindings: Kafka's INVALID_REQUEST and reason each, the good one beside them created.
    let good = acl(
        GROUP,
        &format!("{group}-2"),
        LITERAL,
        &user,
        DESCRIBE,
        ALLOW,
    );
    let r = create(
        &mut admin,
        vec![
            acl(CLUSTER, "not-the-cluster", LITERAL, &user, ALTER, ALLOW),
            acl(GROUP, "", LITERAL, &user, READ, ALLOW),
            acl(99, &group, LITERAL, &user, READ, ALLOW),
            acl(GROUP, &group, 9, &user, READ, ALLOW),
            acl(GROUP, &group, LITERAL, &user, 99, ALLOW),
            acl(GROUP, &group, LITERAL, &user, READ, 9),
            acl(GROUP, &group, LITERAL, &user, READ, ALLOW).with_principal(s("nocolon")),
            good,
        ],
    );
    let answers: Vec<_> = r
        .results
        .iter()
        .map(|r| {
            (
                err(r.error_code),
                r.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .collect();
    let invalid = |m: &str| (Some(ResponseError::InvalidRequest), Some(m.to_string()));
    assert_eq!(
        answers,
        vec![
            invalid("The only valid name for the CLUSTER resource is kafka-cluster"),
            invalid("Invalid empty resource name"),
            invalid("Invalid resourceType UNKNOWN"),
            invalid("Invalid patternType UNKNOWN"),
            invalid("Invalid operation UNKNOWN"),
            invalid("Invalid permissionType UNKNOWN"),
            invalid("Could not parse principal from `nocolon` (no colon is present separating the principal type from the principal name)"),
            (None, Some(String::new())),
        ],
        "{r:?}"
    );
    // A filter-only value (MATCH, ANY) in a binding fails the whole request, as in Kafka 4.4.
    for bad in [
        acl(GROUP, &group, MATCH, &user, READ, ALLOW),
        acl(ANY, &group, LITERAL, &user, READ, ALLOW),
        acl(GROUP, &group, LITERAL, &user, ANY, ALLOW),
        acl(GROUP, &group, LITERAL, &user, READ, ANY),
    ] {
        let r = create(
            &mut admin,
            vec![acl(GROUP, &group, LITERAL, &user, DESCRIBE, DENY), bad],
        );
        for result in &r.results {
            assert_eq!(
                err(result.error_code),
                Some(ResponseError::UnknownServerError),
                "{r:?}"
            );
        }
    }
    wait_until("the good ACL is in force", || {
        acls_of(&mut admin, &user).len() == 3
    });
    // Delete by filter: each filter lists what it matched.
    let r: DeleteAclsResponse = admin.send(
        3,
        &DeleteAclsRequest::default().with_filters(vec![
            DeleteAclsFilter::default()
                .with_resource_type_filter(GROUP)
                .with_resource_name_filter(None)
                .with_pattern_type_filter(ANY)
                .with_principal_filter(Some(s(&principal(&user))))
                .with_host_filter(None)
                .with_operation(ANY)
                .with_permission_type(ANY),
            // An unknown resource type: INVALID_REQUEST for this filter only.
            DeleteAclsFilter::default()
                .with_resource_type_filter(99)
                .with_resource_name_filter(None)
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_pattern_type_filter(ANY)
                .with_operation(ANY)
                .with_permission_type(ANY),
        ]),
    );
    assert_eq!(err(r.filter_results[0].error_code), None, "{r:?}");
    let mut deleted: Vec<_> = r.filter_results[0]
        .matching_acls
        .iter()
        .map(|a| (a.resource_type, a.operation, a.principal.to_string()))
        .collect();
    deleted.sort();
    assert_eq!(
        deleted,
        vec![
            (GROUP, READ, principal(&user)),
            (GROUP, DESCRIBE, principal(&user))
        ]
    );
    assert_eq!(
        err(r.filter_results[1].error_code),
        Some(ResponseError::InvalidRequest),
        "{r:?}"
    );
    wait_until("the deletions are in force", || {
        acls_of(&mut admin, &user) == vec![(TOPIC, prefix.clone(), PREFIXED, DESCRIBE, ALLOW)]
    });
}

#[test]
fn a_request_naming_an_unknown_code_closes_the_connection() {
    let Some(server) = Secured::start("unknown_code") else {
        return;
    };
    let mut admin = server.admin();
    // Code 0 (UNKNOWN) cannot even be parsed by Kafka: the connection is closed.
    let _ = admin.try_send(
        3,
        &CreateAclsRequest::default().with_creations(vec![acl(0, "g", LITERAL, "x", READ, ALLOW)]),
    );
    admin.expect_closed();
    let mut admin = server.admin();
    let _ = admin.try_send(3, &by_principal("x").with_operation(0));
    admin.expect_closed();
}

#[test]
fn a_consumer_without_read_on_the_group_or_topic_is_refused() {
    let Some(server) = Secured::start("group_read") else {
        return;
    };
    let mut admin = server.admin();
    let (bob, mut c) = server.user(&mut admin, "bob");
    let (carol, _) = server.user(&mut admin, "carol");
    let group = common::unique("guarded");
    let topic = common::unique("guarded-topic");
    // The group and topic have ACLs (carol's), none for bob: bob is refused.
    grant(
        &mut admin,
        &carol,
        vec![
            acl(GROUP, &group, LITERAL, &carol, READ, ALLOW),
            acl(TOPIC, &topic, LITERAL, &carol, READ, ALLOW),
        ],
    );
    assert_eq!(
        err(join(&mut c, &group).error_code),
        Some(ResponseError::GroupAuthorizationFailed)
    );
    let d = c.send(
        5,
        &DescribeGroupsRequest::default().with_groups(vec![common::group_id(&group)]),
    );
    assert_eq!(
        err(d.groups[0].error_code),
        Some(ResponseError::GroupAuthorizationFailed)
    );
    // With READ on the group bob gets past authorization (v5 asks for a member id first).
    grant(
        &mut admin,
        &bob,
        vec![acl(GROUP, &group, LITERAL, &bob, READ, ALLOW)],
    );
    assert_eq!(
        err(join(&mut c, &group).error_code),
        Some(ResponseError::MemberIdRequired)
    );
    // Committing an offset of a topic without READ on it: TOPIC_AUTHORIZATION_FAILED.
    let commit = OffsetCommitRequest::default()
        .with_group_id(common::group_id(&group))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(s(""))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(topic_name(&topic))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(5)])]);
    let r = c.send(8, &commit);
    assert_eq!(
        err(r.topics[0].partitions[0].error_code),
        Some(ResponseError::TopicAuthorizationFailed),
        "{r:?}"
    );
}

#[test]
fn a_deny_overrides_an_allow() {
    let Some(server) = Secured::start("deny_wins") else {
        return;
    };
    let mut admin = server.admin();
    let (dave, mut c) = server.user(&mut admin, "dave");
    let prefix = common::unique("denied");
    let open = format!("{prefix}-open");
    let closed = format!("{prefix}-closed");
    grant(
        &mut admin,
        &dave,
        vec![
            acl(GROUP, &prefix, PREFIXED, &dave, ALL, ALLOW),
            acl(GROUP, &closed, LITERAL, &dave, READ, DENY),
        ],
    );
    assert_eq!(
        err(join(&mut c, &open).error_code),
        Some(ResponseError::MemberIdRequired)
    );
    assert_eq!(
        err(join(&mut c, &closed).error_code),
        Some(ResponseError::GroupAuthorizationFailed)
    );
}

#[test]
fn metadata_leaves_out_topics_the_principal_may_not_describe() {
    let Some(server) = Secured::start("metadata_filtered") else {
        return;
    };
    let mut admin = server.admin();
    let (erin, mut c) = server.user(&mut admin, "erin");
    let (frank, _) = server.user(&mut admin, "frank");
    let seen = common::unique("seen");
    let hidden = common::unique("hidden");
    let r = admin.send(
        5,
        &CreateTopicsRequest::default()
            .with_timeout_ms(10_000)
            .with_topics(
                [&seen, &hidden]
                    .iter()
                    .map(|t| {
                        CreatableTopic::default()
                            .with_name(topic_name(t))
                            .with_num_partitions(1)
                            .with_replication_factor(1)
                    })
                    .collect(),
            ),
    );
    for t in &r.topics {
        assert_eq!(err(t.error_code), None, "{r:?}");
    }
    grant(
        &mut admin,
        &erin,
        vec![acl(TOPIC, &seen, LITERAL, &erin, DESCRIBE, ALLOW)],
    );
    grant(
        &mut admin,
        &frank,
        vec![acl(TOPIC, &hidden, LITERAL, &frank, DESCRIBE, ALLOW)],
    );
    let all = |c: &mut Client| -> MetadataResponse {
        c.send(
            8,
            &MetadataRequest::default()
                .with_topics(None)
                .with_include_topic_authorized_operations(true),
        )
    };
    let names = |r: &MetadataResponse| -> Vec<String> {
        r.topics
            .iter()
            .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
            .collect()
    };
    // The admin sees both (once the broker has them).
    wait_until("both topics are listed", || {
        let n = names(&all(&mut admin));
        n.contains(&seen) && n.contains(&hidden)
    });
    let r = all(&mut c);
    assert!(names(&r).contains(&seen), "{r:?}");
    assert!(!names(&r).contains(&hidden), "{r:?}");
    let ops = r
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some(seen.as_str()))
        .map(|t| t.topic_authorized_operations);
    assert_eq!(ops, Some(1 << DESCRIBE), "only DESCRIBE is granted");
    // Named, the hidden topic is TOPIC_AUTHORIZATION_FAILED.
    let r: MetadataResponse = c.send(
        8,
        &MetadataRequest::default()
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(topic_name(&hidden)))
            ]))
            .with_allow_auto_topic_creation(false),
    );
    assert_eq!(
        err(r.topics[0].error_code),
        Some(ResponseError::TopicAuthorizationFailed),
        "{r:?}"
    );
    assert!(!r.topics[0].is_internal, "{r:?}");
    // An internal topic the principal may not describe is not even marked internal, as in
    // Kafka 4.4's KafkaApis. (An ACL of frank's on it, so that allow.everyone.if.no.acl.found
    // leaves erin out; the transaction log, which no client reads.)
    grant(
        &mut admin,
        &frank,
        vec![acl(
            TOPIC,
            "__transaction_state",
            LITERAL,
            &frank,
            DESCRIBE,
            ALLOW,
        )],
    );
    let r: MetadataResponse = c.send(
        8,
        &MetadataRequest::default()
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(topic_name("__transaction_state")))
            ]))
            .with_allow_auto_topic_creation(false),
    );
    assert_eq!(
        err(r.topics[0].error_code),
        Some(ResponseError::TopicAuthorizationFailed),
        "{r:?}"
    );
    assert!(!r.topics[0].is_internal, "{r:?}");
}

#[test]
fn acl_apis_without_an_authorizer_are_security_disabled() {
    let Some(server) = Koord::start_owned("security_disabled", &[]) else {
        return;
    };
    let mut c = server.connect();
    let r = create(&mut c, vec![acl(GROUP, "g", LITERAL, "x", READ, ALLOW)]);
    assert_eq!(
        err(r.results[0].error_code),
        Some(ResponseError::SecurityDisabled)
    );
    let r: DescribeAclsResponse = c.send(3, &by_principal("x"));
    assert_eq!(err(r.error_code), Some(ResponseError::SecurityDisabled));
    let r: DeleteAclsResponse = c.send(
        3,
        &DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()
            .with_resource_type_filter(ANY)
            .with_resource_name_filter(None)
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_pattern_type_filter(ANY)
            .with_operation(ANY)
            .with_permission_type(ANY)]),
    );
    assert_eq!(
        err(r.filter_results[0].error_code),
        Some(ResponseError::SecurityDisabled)
    );
    // And everything stays allowed: a join gets past authorization.
    assert_eq!(
        err(join(&mut c, &common::unique("open-group")).error_code),
        Some(ResponseError::MemberIdRequired)
    );
}

#[test]
fn acls_survive_a_restart() {
    let Some(mut server) = Secured::start("acls_restart") else {
        return;
    };
    if !server.server.is_owned() {
        eprintln!("SKIPPED acls_restart: needs its own koord to restart");
        return;
    }
    let mut admin = server.admin();
    let (gina, _) = server.user(&mut admin, "gina");
    let group = common::unique("kept");
    grant(
        &mut admin,
        &gina,
        vec![acl(GROUP, &group, LITERAL, &gina, READ, DENY)],
    );
    drop(admin);
    server.server.terminate();
    server.server.restart();
    let mut admin = server.admin();
    assert_eq!(
        acls_of(&mut admin, &gina),
        vec![(GROUP, group, LITERAL, READ, DENY)]
    );
}

#[test]
fn topic_apis_without_describe_are_topic_authorization_failed() {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{DescribeConfigsRequest, ListOffsetsRequest};
    let Some(server) = Secured::start("topic_describe") else {
        return;
    };
    let mut admin = server.admin();
    let (hank, mut c) = server.user(&mut admin, "hank");
    let (ivy, _) = server.user(&mut admin, "ivy");
    let topic = common::unique("described");
    // The topic has an ACL (ivy's), none for hank.
    grant(
        &mut admin,
        &ivy,
        vec![acl(TOPIC, &topic, LITERAL, &ivy, ALL, ALLOW)],
    );
    let offsets = |c: &mut Client| {
        let r = c.send(
            7,
            &ListOffsetsRequest::default()
                .with_replica_id((-1).into())
                .with_topics(vec![ListOffsetsTopic::default()
                    .with_name(topic_name(&topic))
                    .with_partitions(vec![ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(-1)])]),
        );
        err(r.topics[0].partitions[0].error_code)
    };
    let configs = |c: &mut Client| {
        let r = c.send(
            4,
            &DescribeConfigsRequest::default().with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s(&topic))
                    .with_configuration_keys(None),
            ]),
        );
        err(r.results[0].error_code)
    };
    assert_eq!(
        offsets(&mut c),
        Some(ResponseError::TopicAuthorizationFailed)
    );
    assert_eq!(
        configs(&mut c),
        Some(ResponseError::TopicAuthorizationFailed)
    );
    // With DESCRIBE (ListOffsets) and DESCRIBE_CONFIGS, hank gets past authorization: the
    // topic does not exist.
    grant(
        &mut admin,
        &hank,
        vec![
            acl(TOPIC, &topic, LITERAL, &hank, DESCRIBE, ALLOW),
            acl(TOPIC, &topic, LITERAL, &hank, 10, ALLOW),
        ],
    );
    assert_eq!(
        offsets(&mut c),
        Some(ResponseError::UnknownTopicOrPartition)
    );
    assert_eq!(
        configs(&mut c),
        Some(ResponseError::UnknownTopicOrPartition)
    );
}

const WRITE: i8 = 4;
const DELETE: i8 = 6;
const DESCRIBE_CONFIGS: i8 = 10;
const ALTER_CONFIGS: i8 = 11;
const TRANSACTIONAL_ID: i8 = 5;

/// Creates `topics` (one partition each, as the admin) and waits until Metadata shows each
/// with a leader: Kafka applies topics through its metadata log.
fn create_topics(admin: &mut Client, topics: &[&str]) {
    let r = admin.send(
        5,
        &CreateTopicsRequest::default()
            .with_timeout_ms(10_000)
            .with_topics(
                topics
                    .iter()
                    .map(|t| {
                        CreatableTopic::default()
                            .with_name(topic_name(t))
                            .with_num_partitions(1)
                            .with_replication_factor(1)
                    })
                    .collect(),
            ),
    );
    for t in &r.topics {
        assert_eq!(err(t.error_code), None, "{r:?}");
    }
    for t in topics {
        wait_until(&format!("{t} has a leader"), || {
            let r: MetadataResponse = admin.send(
                8,
                &MetadataRequest::default()
                    .with_topics(Some(vec![
                        MetadataRequestTopic::default().with_name(Some(topic_name(t)))
                    ]))
                    .with_allow_auto_topic_creation(false),
            );
            r.topics.first().is_some_and(|t| {
                t.error_code == 0
                    && t.partitions.len() == 1
                    && t.partitions.iter().all(|p| p.leader_id.0 >= 0)
            })
        });
    }
}

#[test]
fn add_partitions_to_txn_needs_write_on_the_id_and_on_each_topic() {
    use common::txn::{find_txn_coordinator, init_txn_at};
    use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
    use kafka_protocol::messages::{AddPartitionsToTxnRequest, TransactionalId};
    let Some(server) = Secured::start("add_partitions_to_txn") else {
        return;
    };
    let mut admin = server.admin();
    let (jack, mut c) = server.user(&mut admin, "jack");
    let (kim, _) = server.user(&mut admin, "kim");
    let writable = common::unique("txn-writable");
    let closed = common::unique("txn-closed");
    let txn = common::unique("txn-id");
    let other_txn = common::unique("txn-other");
    create_topics(&mut admin, &[&writable, &closed]);
    grant(
        &mut admin,
        &jack,
        vec![
            acl(TRANSACTIONAL_ID, &txn, LITERAL, &jack, WRITE, ALLOW),
            acl(TOPIC, &writable, LITERAL, &jack, WRITE, ALLOW),
        ],
    );
    // `closed` has an ACL (kim's), none for jack; `other_txn` has kim's.
    grant(
        &mut admin,
        &kim,
        vec![
            acl(TOPIC, &closed, LITERAL, &kim, WRITE, ALLOW),
            acl(TRANSACTIONAL_ID, &other_txn, LITERAL, &kim, WRITE, ALLOW),
        ],
    );
    find_txn_coordinator(&mut c, &txn);
    let (e, pid, epoch) = init_txn_at(&mut c, 4, &txn, 60_000, None);
    assert_eq!(e, None, "InitProducerId");
    let add = |c: &mut Client, id: &str, topics: &[&str]| -> Vec<(String, Option<ResponseError>)> {
        let r = c.send(
            3,
            &AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(TransactionalId(s(id)))
                .with_v3_and_below_producer_id(pid.into())
                .with_v3_and_below_producer_epoch(epoch)
                .with_v3_and_below_topics(
                    topics
                        .iter()
                        .map(|t| {
                            AddPartitionsToTxnTopic::default()
                                .with_name(topic_name(t))
                                .with_partitions(vec![0])
                        })
                        .collect(),
                ),
        );
        let mut out: Vec<_> = r
            .results_by_topic_v3_and_below
            .iter()
            .flat_map(|t| {
                t.results_by_partition
                    .iter()
                    .map(|p| (t.name.to_string(), err(p.partition_error_code)))
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    };
    let sorted = |mut v: Vec<(String, Option<ResponseError>)>| {
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    // Without WRITE on the transactional id: every partition, whatever its topic.
    assert_eq!(
        add(&mut c, &other_txn, &[&writable, &closed]),
        sorted(vec![
            (
                writable.clone(),
                Some(ResponseError::TransactionalIdAuthorizationFailed)
            ),
            (
                closed.clone(),
                Some(ResponseError::TransactionalIdAuthorizationFailed)
            ),
        ])
    );
    // A topic without WRITE fails the whole request; the other partitions are not attempted.
    assert_eq!(
        add(&mut c, &txn, &[&writable, &closed]),
        sorted(vec![
            (writable.clone(), Some(ResponseError::OperationNotAttempted)),
            (
                closed.clone(),
                Some(ResponseError::TopicAuthorizationFailed)
            ),
        ])
    );
    assert_eq!(add(&mut c, &txn, &[&writable]), vec![(writable, None)]);
}

#[test]
fn consumer_group_heartbeat_and_describe_hide_topics_the_principal_may_not_describe() {
    use kafka_protocol::messages::{ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest};
    let Some(server) = Secured::start("consumer_group_topics") else {
        return;
    };
    let mut admin = server.admin();
    let (lena, mut c) = server.user(&mut admin, "lena");
    let (max, mut other) = server.user(&mut admin, "max");
    let group = common::unique("cg-guarded");
    let mine = common::unique("cg-mine");
    let theirs = common::unique("cg-theirs");
    create_topics(&mut admin, &[&mine, &theirs]);
    grant(
        &mut admin,
        &lena,
        vec![
            acl(GROUP, &group, LITERAL, &lena, READ, ALLOW),
            acl(TOPIC, &mine, LITERAL, &lena, READ, ALLOW),
        ],
    );
    grant(
        &mut admin,
        &max,
        vec![
            acl(GROUP, &group, LITERAL, &max, DESCRIBE, ALLOW),
            acl(TOPIC, &theirs, LITERAL, &max, READ, ALLOW),
        ],
    );
    let join = |c: &mut Client, topics: &[&str]| {
        c.send(
            1,
            &ConsumerGroupHeartbeatRequest::default()
                .with_group_id(common::group_id(&group))
                .with_member_id(s(&common::unique("member")))
                .with_member_epoch(0)
                .with_rebalance_timeout_ms(30_000)
                .with_subscribed_topic_names(Some(topics.iter().map(|t| topic_name(t)).collect()))
                .with_topic_partitions(Some(vec![])),
        )
    };
    // Naming a topic it may not describe: refused, whatever else it names.
    let r = join(&mut c, &[&mine, &theirs]);
    assert_eq!(
        err(r.error_code),
        Some(ResponseError::TopicAuthorizationFailed),
        "{r:?}"
    );
    let r = join(&mut c, &[&mine]);
    assert_eq!(err(r.error_code), None, "{r:?}");
    assert!(r.member_epoch > 0, "{r:?}");
    let describe = |c: &mut Client| {
        let r = c.send(
            0,
            &ConsumerGroupDescribeRequest::default().with_group_ids(vec![common::group_id(&group)]),
        );
        (err(r.groups[0].error_code), r.groups[0].members.len())
    };
    assert_eq!(describe(&mut c), (None, 1));
    // max may describe the group, but not the topic its member subscribes to.
    assert_eq!(
        describe(&mut other),
        (Some(ResponseError::TopicAuthorizationFailed), 0)
    );
}

#[test]
fn topic_admin_apis_need_their_operation_on_the_topic() {
    use kafka_protocol::messages::alter_configs_request::{
        AlterConfigsResource, AlterableConfig as LegacyConfig,
    };
    use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource as IncrementalResource, AlterableConfig,
    };
    use kafka_protocol::messages::offset_for_leader_epoch_request::{
        OffsetForLeaderPartition, OffsetForLeaderTopic,
    };
    use kafka_protocol::messages::{
        AlterConfigsRequest, CreatePartitionsRequest, DeleteRecordsRequest,
        IncrementalAlterConfigsRequest, OffsetForLeaderEpochRequest,
    };
    let Some(server) = Secured::start("topic_admin_apis") else {
        return;
    };
    let mut admin = server.admin();
    let (nora, mut c) = server.user(&mut admin, "nora");
    let (otto, _) = server.user(&mut admin, "otto");
    let topic = common::unique("admin-apis");
    create_topics(&mut admin, &[&topic]);
    // The topic has an ACL (otto's), none for nora.
    grant(
        &mut admin,
        &otto,
        vec![acl(TOPIC, &topic, LITERAL, &otto, ALL, ALLOW)],
    );
    let create_partitions = |c: &mut Client| {
        let r = c.send(
            3,
            &CreatePartitionsRequest::default()
                .with_timeout_ms(10_000)
                // Validate only: the test leaves the topic as it is.
                .with_validate_only(true)
                .with_topics(vec![CreatePartitionsTopic::default()
                    .with_name(topic_name(&topic))
                    .with_count(2)
                    .with_assignments(None)]),
        );
        err(r.results[0].error_code)
    };
    let delete_records = |c: &mut Client| {
        let r = c.send(
            2,
            &DeleteRecordsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![DeleteRecordsTopic::default()
                    .with_name(topic_name(&topic))
                    .with_partitions(vec![DeleteRecordsPartition::default()
                        .with_partition_index(0)
                        .with_offset(0)])]),
        );
        err(r.topics[0].partitions[0].error_code)
    };
    let alter_configs = |c: &mut Client| {
        let r = c.send(
            2,
            &AlterConfigsRequest::default()
                .with_validate_only(true)
                .with_resources(vec![AlterConfigsResource::default()
                    .with_resource_type(TOPIC)
                    .with_resource_name(s(&topic))
                    .with_configs(vec![LegacyConfig::default()
                        .with_name(s("retention.ms"))
                        .with_value(Some(s("3600000")))])]),
        );
        err(r.responses[0].error_code)
    };
    let incremental_alter_configs = |c: &mut Client| {
        let r = c.send(
            1,
            &IncrementalAlterConfigsRequest::default()
                .with_validate_only(true)
                .with_resources(vec![IncrementalResource::default()
                    .with_resource_type(TOPIC)
                    .with_resource_name(s(&topic))
                    .with_configs(vec![AlterableConfig::default()
                        .with_name(s("retention.ms"))
                        .with_config_operation(0)
                        .with_value(Some(s("3600000")))])]),
        );
        err(r.responses[0].error_code)
    };
    let leader_epoch = |c: &mut Client| {
        let r = c.send(
            4,
            &OffsetForLeaderEpochRequest::default()
                .with_replica_id((-1).into())
                .with_topics(vec![OffsetForLeaderTopic::default()
                    .with_topic(topic_name(&topic))
                    .with_partitions(vec![OffsetForLeaderPartition::default()
                        .with_partition(0)
                        .with_current_leader_epoch(-1)
                        .with_leader_epoch(0)])]),
        );
        err(r.topics[0].partitions[0].error_code)
    };
    let denied = Some(ResponseError::TopicAuthorizationFailed);
    assert_eq!(create_partitions(&mut c), denied, "CreatePartitions");
    assert_eq!(delete_records(&mut c), denied, "DeleteRecords");
    assert_eq!(alter_configs(&mut c), denied, "AlterConfigs");
    assert_eq!(
        incremental_alter_configs(&mut c),
        denied,
        "IncrementalAlterConfigs"
    );
    // OffsetForLeaderEpoch takes CLUSTER_ACTION (a follower's right) or DESCRIBE on the topic;
    // nobody has ACLs on the cluster here, so allow.everyone.if.no.acl.found grants the first
    // (the denial without either is a unit test: src/api/offset_for_leader_epoch.rs).
    assert_eq!(leader_epoch(&mut c), None, "OffsetForLeaderEpoch");
    // Each with its own operation: ALTER, DELETE, ALTER_CONFIGS, DESCRIBE.
    grant(
        &mut admin,
        &nora,
        vec![
            acl(TOPIC, &topic, LITERAL, &nora, ALTER, ALLOW),
            acl(TOPIC, &topic, LITERAL, &nora, DELETE, ALLOW),
            acl(TOPIC, &topic, LITERAL, &nora, ALTER_CONFIGS, ALLOW),
        ],
    );
    assert_eq!(create_partitions(&mut c), None, "CreatePartitions");
    assert_eq!(delete_records(&mut c), None, "DeleteRecords");
    assert_eq!(alter_configs(&mut c), None, "AlterConfigs");
    assert_eq!(
        incremental_alter_configs(&mut c),
        None,
        "IncrementalAlterConfigs"
    );
    // DESCRIBE_CONFIGS alone does not allow altering them.
    let (pia, mut p) = server.user(&mut admin, "pia");
    grant(
        &mut admin,
        &pia,
        vec![acl(TOPIC, &topic, LITERAL, &pia, DESCRIBE_CONFIGS, ALLOW)],
    );
    assert_eq!(alter_configs(&mut p), denied, "AlterConfigs");
    assert_eq!(
        incremental_alter_configs(&mut p),
        denied,
        "IncrementalAlterConfigs"
    );
}

#[test]
fn offset_delete_needs_delete_on_the_group_and_read_on_the_topic() {
    use kafka_protocol::messages::offset_delete_request::{
        OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
    };
    use kafka_protocol::messages::OffsetDeleteRequest;
    let Some(server) = Secured::start("offset_delete") else {
        return;
    };
    let mut admin = server.admin();
    let (quinn, mut c) = server.user(&mut admin, "quinn");
    let (rita, _) = server.user(&mut admin, "rita");
    let group = common::unique("od-group");
    let topic = common::unique("od-topic");
    create_topics(&mut admin, &[&topic]);
    // The admin commits an offset: an empty group with an offset to delete.
    let r = admin.send(
        8,
        &OffsetCommitRequest::default()
            .with_group_id(common::group_id(&group))
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(s(""))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(topic_name(&topic))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(0)])]),
    );
    assert_eq!(err(r.topics[0].partitions[0].error_code), None, "{r:?}");
    // The group and the topic have ACLs (rita's), none for quinn.
    grant(
        &mut admin,
        &rita,
        vec![
            acl(GROUP, &group, LITERAL, &rita, ALL, ALLOW),
            acl(TOPIC, &topic, LITERAL, &rita, ALL, ALLOW),
        ],
    );
    let delete = |c: &mut Client| {
        let r = c.send(
            0,
            &OffsetDeleteRequest::default()
                .with_group_id(common::group_id(&group))
                .with_topics(vec![OffsetDeleteRequestTopic::default()
                    .with_name(topic_name(&topic))
                    .with_partitions(vec![
                        OffsetDeleteRequestPartition::default().with_partition_index(0)
                    ])]),
        );
        (
            err(r.error_code),
            r.topics
                .first()
                .and_then(|t| t.partitions.first())
                .map(|p| err(p.error_code)),
        )
    };
    assert_eq!(
        delete(&mut c),
        (Some(ResponseError::GroupAuthorizationFailed), None)
    );
    // READ on the group is not DELETE.
    grant(
        &mut admin,
        &quinn,
        vec![acl(GROUP, &group, LITERAL, &quinn, READ, ALLOW)],
    );
    assert_eq!(
        delete(&mut c),
        (Some(ResponseError::GroupAuthorizationFailed), None)
    );
    grant(
        &mut admin,
        &quinn,
        vec![acl(GROUP, &group, LITERAL, &quinn, DELETE, ALLOW)],
    );
    assert_eq!(
        delete(&mut c),
        (None, Some(Some(ResponseError::TopicAuthorizationFailed)))
    );
    grant(
        &mut admin,
        &quinn,
        vec![acl(TOPIC, &topic, LITERAL, &quinn, READ, ALLOW)],
    );
    assert_eq!(delete(&mut c), (None, Some(None)));
}

#[test]
fn a_regex_subscription_resolves_only_to_topics_the_member_may_describe() {
    use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
    use kafka_protocol::messages::ConsumerGroupHeartbeatRequest;
    let Some(server) = Secured::start("regex_describe") else {
        return;
    };
    let mut admin = server.admin();
    let (sam, mut c) = server.user(&mut admin, "sam");
    let (tess, _) = server.user(&mut admin, "tess");
    let group = common::unique("rx-group");
    let prefix = common::unique("rx");
    let (mine, theirs) = (format!("{prefix}-mine"), format!("{prefix}-theirs"));
    create_topics(&mut admin, &[&mine, &theirs]);
    grant(
        &mut admin,
        &sam,
        vec![
            acl(GROUP, &group, LITERAL, &sam, READ, ALLOW),
            acl(TOPIC, &mine, LITERAL, &sam, READ, ALLOW),
        ],
    );
    grant(
        &mut admin,
        &tess,
        vec![acl(TOPIC, &theirs, LITERAL, &tess, READ, ALLOW)],
    );
    let r: MetadataResponse = admin.send(
        12,
        &MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(topic_name(&mine)))
        ])),
    );
    let mine_id = r.topics[0].topic_id;
    // Join with a regular expression matching both, then heartbeat (acknowledging what is
    // assigned) until something is assigned: Kafka resolves expressions in the background.
    let member = common::unique("member");
    let mut req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(common::group_id(&group))
        .with_member_id(s(&member))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(None)
        .with_subscribed_topic_regex(Some(s(&format!("{prefix}-.*"))))
        .with_topic_partitions(Some(vec![]));
    let mut assigned: Vec<TopicPartitions> = Vec::new();
    wait_until("a partition is assigned", || {
        let r = c.send(1, &req);
        assert_eq!(err(r.error_code), None, "{r:?}");
        if let Some(a) = &r.assignment {
            assigned = a
                .topic_partitions
                .iter()
                .map(|t| {
                    TopicPartitions::default()
                        .with_topic_id(t.topic_id)
                        .with_partitions(t.partitions.clone())
                })
                .collect();
        }
        req = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(common::group_id(&group))
            .with_member_id(s(&member))
            .with_member_epoch(r.member_epoch)
            .with_rebalance_timeout_ms(-1)
            .with_subscribed_topic_names(None)
            .with_topic_partitions(Some(assigned.clone()));
        assigned.iter().any(|t| !t.partitions.is_empty())
    });
    let topics: Vec<_> = assigned
        .iter()
        .filter(|t| !t.partitions.is_empty())
        .map(|t| t.topic_id)
        .collect();
    assert_eq!(topics, vec![mine_id], "only the topic sam may describe");
}

/// DescribeClientQuotas needs DESCRIBE_CONFIGS on the cluster and AlterClientQuotas
/// ALTER_CONFIGS (Kafka's `KafkaApis.handleDescribeClientQuotasRequest` and
/// `ControllerApis.handleAlterClientQuotas`): CLUSTER_AUTHORIZATION_FAILED for the request, or
/// for each entry, nothing altered. koord only: an ACL on the cluster resource would change
/// what every other test's users may do on a shared Kafka.
#[test]
fn client_quota_apis_need_their_operation_on_the_cluster() {
    use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
    use kafka_protocol::messages::{AlterClientQuotasRequest, DescribeClientQuotasRequest};
    if common::bootstrap().is_some() {
        eprintln!("SKIPPED client_quota_apis: a cluster ACL would affect the other tests");
        return;
    }
    let Some(server) = Secured::start("client_quota_apis") else {
        return;
    };
    let mut admin = server.admin();
    let (user, mut c) = server.user(&mut admin, "quincy");
    // An ACL on the cluster resource: allow.everyone.if.no.acl.found no longer lets the user
    // act on it.
    grant(
        &mut admin,
        &user,
        vec![acl(
            CLUSTER,
            "kafka-cluster",
            LITERAL,
            &user,
            DESCRIBE,
            ALLOW,
        )],
    );
    let cluster = Some(ResponseError::ClusterAuthorizationFailed);
    let describe = DescribeClientQuotasRequest::default();
    let alter = AlterClientQuotasRequest::default().with_entries(vec![EntryData::default()
        .with_entity(vec![EntityData::default()
            .with_entity_type(s("client-id"))
            .with_entity_name(Some(s("app")))])
        .with_ops(vec![OpData::default()
            .with_key(s("producer_byte_rate"))
            .with_value(1024.0)])]);
    let r = c.send(1, &describe);
    assert_eq!(err(r.error_code), cluster, "{r:?}");
    assert_eq!(
        r.error_message.as_deref(),
        Some("Cluster authorization failed.")
    );
    assert!(r.entries.is_none());
    let r = c.send(1, &alter);
    assert_eq!(r.entries.len(), 1, "{r:?}");
    assert_eq!(err(r.entries[0].error_code), cluster, "{r:?}");
    assert_eq!(r.entries[0].entity[0].entity_name.as_deref(), Some("app"));
    grant(
        &mut admin,
        &user,
        vec![
            acl(
                CLUSTER,
                "kafka-cluster",
                LITERAL,
                &user,
                DESCRIBE_CONFIGS,
                ALLOW,
            ),
            acl(
                CLUSTER,
                "kafka-cluster",
                LITERAL,
                &user,
                ALTER_CONFIGS,
                ALLOW,
            ),
        ],
    );
    let r = c.send(1, &alter);
    assert_eq!(err(r.entries[0].error_code), None, "{r:?}");
    let r = c.send(1, &describe);
    assert_eq!(err(r.error_code), None, "{r:?}");
    assert_eq!(r.entries.map(|e| e.len()), Some(1));
}
