//! DescribeUserScramCredentials (key 50), v0: the SCRAM mechanisms and iteration counts of
//! users (never their secrets). No users named: every user with a credential. As Kafka: a user
//! named twice gets DUPLICATE_RESOURCE, a user without credentials RESOURCE_NOT_FOUND.

use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::ResponseError;

use crate::api::str_bytes;
use crate::broker::Broker;

pub fn handle(
    broker: &Broker,
    req: DescribeUserScramCredentialsRequest,
    _version: i16,
) -> DescribeUserScramCredentialsResponse {
    let credentials = &broker.credentials;
    let asked: Vec<String> = match &req.users {
        Some(users) if !users.is_empty() => {
            users.iter().map(|u| u.name.as_str().to_string()).collect()
        }
        _ => credentials.users(),
    };
    let mut once: Vec<&String> = Vec::new();
    for user in &asked {
        if !once.contains(&user) {
            once.push(user);
        }
    }
    let results = once
        .into_iter()
        .map(|user| {
            let result =
                DescribeUserScramCredentialsResult::default().with_user(str_bytes(user.clone()));
            if asked.iter().filter(|u| *u == user).count() > 1 {
                return result
                    .with_error_code(ResponseError::DuplicateResource.code())
                    .with_error_message(Some(str_bytes(format!(
                        "Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
                    ))));
            }
            match credentials.describe(user) {
                Some(infos) => result.with_credential_infos(
                    infos
                        .into_iter()
                        .map(|(m, iterations)| {
                            CredentialInfo::default()
                                .with_mechanism(m.code())
                                .with_iterations(iterations as i32)
                        })
                        .collect(),
                ),
                None => result
                    .with_error_code(ResponseError::ResourceNotFound.code())
                    .with_error_message(Some(str_bytes(format!(
                        "Attempt to describe a user credential that does not exist: {user}"
                    )))),
            }
        })
        .collect();
    DescribeUserScramCredentialsResponse::default().with_results(results)
}
