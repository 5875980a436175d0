//! The SCRAM users: every credential in memory, loaded from the store at start-up and changed
//! by AlterUserScramCredentials once the change is durable. PLAIN checks a password against
//! the same credentials, so one `kafka-configs --add-config SCRAM-SHA-512=[password=...]` makes
//! a user for every mechanism.

use std::collections::BTreeMap;
use std::sync::{PoisonError, RwLock};

use super::scram::{ScramCredential, ScramMechanism};

/// One change to the users, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialChange {
    Put {
        user: String,
        mechanism: ScramMechanism,
        credential: ScramCredential,
    },
    Delete {
        user: String,
        mechanism: ScramMechanism,
    },
}

type Users = BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>;

/// The users and their SCRAM credentials. Reads take a std `RwLock` briefly; nothing is awaited
/// while it is held.
#[derive(Debug, Default)]
pub struct Credentials {
    users: RwLock<Users>,
    /// Held by AlterUserScramCredentials from its checks until its change is applied, so two
    /// alterations cannot interleave between check and write.
    pub writes: tokio::sync::Mutex<()>,
}

impl Credentials {
    /// The users as stored.
    pub fn new(loaded: Vec<(String, ScramMechanism, ScramCredential)>) -> Credentials {
        let c = Credentials::default();
        {
            let mut users = c.write();
            for (user, m, credential) in loaded {
                users.entry(user).or_default().insert(m, credential);
            }
        }
        c
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Users> {
        self.users.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Users> {
        self.users.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// `user`'s credential for `mechanism`.
    pub fn get(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        self.read().get(user)?.get(&mechanism).cloned()
    }

    /// Whether `password` is `user`'s (PLAIN): checked against the user's strongest credential.
    pub fn check_password(&self, user: &str, password: &str) -> bool {
        let found = self
            .read()
            .get(user)
            .and_then(|by_mech| by_mech.iter().next_back().map(|(m, c)| (*m, c.clone())));
        found.is_some_and(|(m, c)| c.verify_password(m, password))
    }

    /// `user`'s mechanisms and iteration counts; `None` for a user without credentials.
    pub fn describe(&self, user: &str) -> Option<Vec<(ScramMechanism, u32)>> {
        self.read()
            .get(user)
            .filter(|m| !m.is_empty())
            .map(|m| m.iter().map(|(m, c)| (*m, c.iterations)).collect())
    }

    /// Every user with a credential, in name order.
    pub fn users(&self) -> Vec<String> {
        self.read()
            .iter()
            .filter(|(_, m)| !m.is_empty())
            .map(|(u, _)| u.clone())
            .collect()
    }

    /// Every credential: user, mechanism, credential.
    pub fn all(&self) -> Vec<(String, ScramMechanism, ScramCredential)> {
        self.read()
            .iter()
            .flat_map(|(u, m)| m.iter().map(move |(m, c)| (u.clone(), *m, c.clone())))
            .collect()
    }

    /// Applies stored changes.
    pub fn apply(&self, changes: &[CredentialChange]) {
        let mut users = self.write();
        for c in changes {
            match c {
                CredentialChange::Put {
                    user,
                    mechanism,
                    credential,
                } => {
                    users
                        .entry(user.clone())
                        .or_default()
                        .insert(*mechanism, credential.clone());
                }
                CredentialChange::Delete { user, mechanism } => {
                    if let Some(m) = users.get_mut(user) {
                        m.remove(mechanism);
                        if m.is_empty() {
                            users.remove(user);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_users_and_changes() {
        let m = ScramMechanism::Sha256;
        let c = Credentials::new(vec![(
            "alice".into(),
            m,
            ScramCredential::from_password(m, "pw", 4096),
        )]);
        assert!(c.check_password("alice", "pw"));
        assert!(!c.check_password("alice", "nope"));
        assert!(!c.check_password("bob", "pw"));
        c.apply(&[CredentialChange::Put {
            user: "alice".into(),
            mechanism: ScramMechanism::Sha512,
            credential: ScramCredential::from_password(ScramMechanism::Sha512, "new", 8192),
        }]);
        assert!(c.check_password("alice", "new"), "the strongest is checked");
        assert_eq!(
            c.describe("alice").unwrap(),
            vec![
                (ScramMechanism::Sha256, 4096),
                (ScramMechanism::Sha512, 8192)
            ]
        );
        c.apply(&[
            CredentialChange::Delete {
                user: "alice".into(),
                mechanism: ScramMechanism::Sha256,
            },
            CredentialChange::Delete {
                user: "alice".into(),
                mechanism: ScramMechanism::Sha512,
            },
        ]);
        assert_eq!(c.describe("alice"), None);
        assert!(c.users().is_empty());
    }
}
