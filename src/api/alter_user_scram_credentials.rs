//! AlterUserScramCredentials (key 51), v0: upserts and deletes SCRAM credentials, what
//! `kafka-configs --alter --add-config 'SCRAM-SHA-512=[password=...]' --entity-type users`
//! sends. The client salts and hashes the password; koord keeps the stored and server keys
//! derived from it (RFC 5802), durably. One result per user, in the order first named; as
//! Kafka's controller, a user with any bad alteration gets that error and none of its
//! alterations is applied.

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
};
use kafka_protocol::ResponseError;

use crate::api::str_bytes;
use crate::broker::Broker;
use crate::security::credentials::CredentialChange;
use crate::security::scram::{ScramCredential, ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS};

/// One requested alteration, checked.
type Checked = Result<CredentialChange, (ResponseError, String)>;

fn mechanism(code: i8) -> Result<ScramMechanism, (ResponseError, String)> {
    ScramMechanism::from_code(code).ok_or((
        ResponseError::UnsupportedSaslMechanism,
        "Unknown SCRAM mechanism".into(),
    ))
}

pub async fn handle(
    broker: &Broker,
    req: AlterUserScramCredentialsRequest,
    _version: i16,
) -> AlterUserScramCredentialsResponse {
    let _writes = broker.credentials.writes.lock().await;
    let mut named: Vec<(String, i8)> = Vec::new();
    let mut checked: Vec<(String, Checked)> = Vec::new();
    for d in &req.deletions {
        let user = d.name.as_str().to_string();
        named.push((user.clone(), d.mechanism));
        let change = mechanism(d.mechanism).and_then(|m| {
            if broker.credentials.get(&user, m).is_none() {
                return Err((
                    ResponseError::ResourceNotFound,
                    "Attempt to delete a user credential that does not exist".into(),
                ));
            }
            Ok(CredentialChange::Delete {
                user: user.clone(),
                mechanism: m,
            })
        });
        checked.push((user, change));
    }
    for u in &req.upsertions {
        let user = u.name.as_str().to_string();
        named.push((user.clone(), u.mechanism));
        let change = mechanism(u.mechanism).and_then(|m| {
            let iterations = u32::try_from(u.iterations).unwrap_or(0);
            if user.is_empty() {
                return Err((
                    ResponseError::UnacceptableCredential,
                    "Username must not be empty".into(),
                ));
            }
            if iterations < MIN_ITERATIONS {
                return Err((
                    ResponseError::UnacceptableCredential,
                    "Too few iterations".into(),
                ));
            }
            if iterations > MAX_ITERATIONS {
                return Err((
                    ResponseError::UnacceptableCredential,
                    "Too many iterations".into(),
                ));
            }
            if u.salt.is_empty() || u.salted_password.is_empty() {
                return Err((
                    ResponseError::UnacceptableCredential,
                    "Salt and salted password must not be empty".into(),
                ));
            }
            Ok(CredentialChange::Put {
                user: user.clone(),
                mechanism: m,
                credential: ScramCredential::from_salted(
                    m,
                    &u.salted_password,
                    u.salt.to_vec(),
                    iterations,
                ),
            })
        });
        checked.push((user, change));
    }
    // The same user and mechanism twice in one request.
    for (i, (user, m)) in named.iter().enumerate() {
        if named[..i].iter().any(|(u2, m2)| u2 == user && m2 == m) {
            checked.push((
                user.clone(),
                Err((
                    ResponseError::DuplicateResource,
                    "A user credential cannot be altered twice in the same request".into(),
                )),
            ));
        }
    }
    let mut users: Vec<&String> = Vec::new();
    for (user, _) in &checked {
        if !users.contains(&user) {
            users.push(user);
        }
    }
    let mut changes = Vec::new();
    let mut results = Vec::new();
    for user in users {
        let error = checked
            .iter()
            .filter(|(u, _)| u == user)
            .find_map(|(_, c)| c.as_ref().err().cloned());
        let result = AlterUserScramCredentialsResult::default().with_user(str_bytes(user.clone()));
        match error {
            Some((code, message)) => results.push(
                result
                    .with_error_code(code.code())
                    .with_error_message(Some(str_bytes(message))),
            ),
            None => {
                changes.extend(
                    checked
                        .iter()
                        .filter(|(u, _)| u == user)
                        .filter_map(|(_, c)| c.as_ref().ok().cloned()),
                );
                results.push(result);
            }
        }
    }
    if let Err(e) = broker.change_credentials(changes).await {
        tracing::warn!("credentials not stored: {e}");
        for r in results.iter_mut().filter(|r| r.error_code == 0) {
            r.error_code = ResponseError::UnknownServerError.code();
            r.error_message = Some(str_bytes(format!("not stored: {e}")));
        }
    }
    AlterUserScramCredentialsResponse::default().with_results(results)
}
