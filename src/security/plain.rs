//! The PLAIN mechanism's one message (RFC 4616): `[authzid] NUL authcid NUL passwd`.

/// A parsed PLAIN token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlainToken {
    pub user: String,
    pub password: String,
}

/// Parses a PLAIN token. As Kafka's `PlainSaslServer`: the user and password must be
/// non-empty, and an authorization id, if given, must be the user.
///
/// # Errors
/// A message saying what is wrong (sent back to the client).
pub fn parse(token: &[u8]) -> Result<PlainToken, &'static str> {
    let token = std::str::from_utf8(token).map_err(|_| "Invalid SASL/PLAIN response: not UTF-8")?;
    let mut parts = token.split('\0');
    let (Some(authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("Invalid SASL/PLAIN response: expected 3 tokens");
    };
    if user.is_empty() {
        return Err("Authentication failed: username not specified");
    }
    if password.is_empty() {
        return Err("Authentication failed: password not specified");
    }
    if !authzid.is_empty() && authzid != user {
        return Err("Authentication failed: Client requested an authorization id that is different from username");
    }
    Ok(PlainToken {
        user: user.to_string(),
        password: password.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_tokens() {
        let t = parse(b"\0alice\0secret").unwrap();
        assert_eq!((t.user.as_str(), t.password.as_str()), ("alice", "secret"));
        assert!(parse(b"alice\0alice\0pw").is_ok());
        for bad in [
            &b""[..],
            b"alice",
            b"\0alice",
            b"\0\0pw",
            b"\0alice\0",
            b"bob\0alice\0pw",
            b"\0a\0b\0c",
            b"\0\xff\0pw",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn fuzzed_tokens_never_panic() {
        use proptest::prelude::*;
        proptest::test_runner::TestRunner::default()
            .run(&proptest::collection::vec(any::<u8>(), 0..100), |b| {
                let _ = parse(&b);
                Ok(())
            })
            .unwrap();
    }
}
