//! A checked big-endian cursor over bytes from a peer or from disk, shared by koord's
//! hand-written formats (the consumer protocol's topic prefix, the learner wire and state, the
//! store's values). Every read checks the bytes left before it uses them, so short or damaged
//! input is a [`ReadError`], never a panic, and a count is checked against the bytes present
//! before anything is sized by it. Each format maps [`ReadError`] to its own error.

use thiserror::Error;

/// Why a read failed; `what` is the caller's name for what it was reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ReadError {
    /// Fewer bytes are left than the read needs (for a count: its items' minimum size).
    #[error("{what} is truncated (needs {needed} more bytes, has {left})")]
    Short {
        what: &'static str,
        needed: usize,
        left: usize,
    },
    /// A length or count prefix is negative.
    #[error("negative length {len} of {what}")]
    NegativeLength { what: &'static str, len: i64 },
    /// A string's bytes are not UTF-8.
    #[error("{what} is not UTF-8")]
    NotUtf8 { what: &'static str },
}

/// A cursor over a byte slice: each read consumes what it returns. After an error the position
/// is unspecified (every format gives up on its input at the first one).
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf }
    }

    /// The number of bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The next `n` bytes.
    ///
    /// # Errors
    /// [`ReadError::Short`] if fewer than `n` are left.
    pub fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], ReadError> {
        if self.buf.len() < n {
            return Err(ReadError::Short {
                what,
                needed: n,
                left: self.buf.len(),
            });
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], ReadError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }

    /// # Errors
    /// [`ReadError::Short`].
    pub fn u8(&mut self, what: &'static str) -> Result<u8, ReadError> {
        Ok(u8::from_be_bytes(self.array(what)?))
    }

    /// # Errors
    /// [`ReadError::Short`].
    pub fn i8(&mut self, what: &'static str) -> Result<i8, ReadError> {
        Ok(i8::from_be_bytes(self.array(what)?))
    }

    /// # Errors
    /// [`ReadError::Short`].
    pub fn u16(&mut self, what: &'static str) -> Result<u16, ReadError> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }

    /// # Errors
    /// [`ReadError::Short`].
    pub fn i16(&mut self, what: &'static str) -> Result<i16, ReadError> {
        Ok(i16::from_be_bytes(self.array(what)?))
    }

    /// # Errors
    /// [`ReadError::Short`].
    pub fn u32(&mut self, what: &'static str) -> Result<u32, ReadError> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }

    /// # Errors
    /// [`ReadError::Short`].
    pub fn i32(&mut self, what: &'static str) -> Result<i32, ReadError> {
        Ok(i32::from_be_bytes(self.array(what)?))
    }

    /// # Errors
    /// [`ReadError::Short`].
    pub fn u64(&mut self, what: &'static str) -> Result<u64, ReadError> {
        Ok(u64::from_be_bytes(self.array(what)?))
    }

    /// # Errors
    /// [`ReadError::Short`].
    pub fn i64(&mut self, what: &'static str) -> Result<i64, ReadError> {
        Ok(i64::from_be_bytes(self.array(what)?))
    }

    /// An int32 array count whose items take at least `min_item` bytes each, checked against
    /// the bytes left so that a damaged count cannot size an allocation.
    ///
    /// # Errors
    /// [`ReadError::Short`] (the count itself, or its items cannot fit), or
    /// [`ReadError::NegativeLength`].
    pub fn count_i32(&mut self, what: &'static str, min_item: usize) -> Result<usize, ReadError> {
        let n = self.i32(what)?;
        let n = usize::try_from(n).map_err(|_| ReadError::NegativeLength {
            what,
            len: i64::from(n),
        })?;
        self.fits(what, n, min_item)
    }

    /// A uint32 array count whose items take at least `min_item` bytes each, checked against
    /// the bytes left so that a damaged count cannot size an allocation.
    ///
    /// # Errors
    /// [`ReadError::Short`] (the count itself, or its items cannot fit).
    pub fn count_u32(&mut self, what: &'static str, min_item: usize) -> Result<usize, ReadError> {
        let n = self.u32(what)?;
        // Beyond usize (16-bit targets) the items cannot be there either: a short read.
        let n = usize::try_from(n).map_err(|_| ReadError::Short {
            what,
            needed: usize::MAX,
            left: self.buf.len(),
        })?;
        self.fits(what, n, min_item)
    }

    /// `n`, if `n` items of at least `min_item` bytes each fit in the bytes left: the check of
    /// [`Reader::count_i32`] for a count that is not a prefix (say, a sum of other counts).
    ///
    /// # Errors
    /// [`ReadError::Short`].
    pub fn fits(&self, what: &'static str, n: usize, min_item: usize) -> Result<usize, ReadError> {
        let needed = n.saturating_mul(min_item);
        if needed > self.buf.len() {
            return Err(ReadError::Short {
                what,
                needed,
                left: self.buf.len(),
            });
        }
        Ok(n)
    }

    /// Bytes after an int16 length (Kafka's non-nullable classic `string`).
    ///
    /// # Errors
    /// [`ReadError::Short`] or [`ReadError::NegativeLength`].
    pub fn bytes_i16(&mut self, what: &'static str) -> Result<&'a [u8], ReadError> {
        let len = self.i16(what)?;
        let len = usize::try_from(len).map_err(|_| ReadError::NegativeLength {
            what,
            len: i64::from(len),
        })?;
        self.take(len, what)
    }

    /// Bytes after a uint32 length.
    ///
    /// # Errors
    /// [`ReadError::Short`].
    pub fn bytes_u32(&mut self, what: &'static str) -> Result<&'a [u8], ReadError> {
        let len = self.u32(what)?;
        // Beyond usize (16-bit targets) the bytes cannot be there either: a short read.
        self.take(usize::try_from(len).unwrap_or(usize::MAX), what)
    }

    /// A UTF-8 string after a uint16 length.
    ///
    /// # Errors
    /// [`ReadError::Short`] or [`ReadError::NotUtf8`].
    pub fn str_u16(&mut self, what: &'static str) -> Result<&'a str, ReadError> {
        let len = self.u16(what)?;
        utf8(self.take(usize::from(len), what)?, what)
    }

    /// A UTF-8 string after an int16 length.
    ///
    /// # Errors
    /// As [`Reader::bytes_i16`], or [`ReadError::NotUtf8`].
    pub fn str_i16(&mut self, what: &'static str) -> Result<&'a str, ReadError> {
        utf8(self.bytes_i16(what)?, what)
    }

    /// A UTF-8 string after a uint32 length.
    ///
    /// # Errors
    /// As [`Reader::bytes_u32`], or [`ReadError::NotUtf8`].
    pub fn str_u32(&mut self, what: &'static str) -> Result<&'a str, ReadError> {
        utf8(self.bytes_u32(what)?, what)
    }
}

fn utf8<'a>(bytes: &'a [u8], what: &'static str) -> Result<&'a str, ReadError> {
    std::str::from_utf8(bytes).map_err(|_| ReadError::NotUtf8 { what })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn short(what: &'static str, needed: usize, left: usize) -> ReadError {
        ReadError::Short { what, needed, left }
    }

    #[test]
    fn reads_big_endian_at_every_width() {
        let bytes = [
            0xff, // u8
            0xfe, // i8
            0x01, 0x02, // u16
            0xff, 0xfd, // i16
            0x01, 0x02, 0x03, 0x04, // u32
            0xff, 0xff, 0xff, 0xfc, // i32
            0, 0, 0, 0, 0, 0, 0x01, 0x00, // u64
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfb, // i64
        ];
        let mut r = Reader::new(&bytes);
        assert_eq!(r.u8("a"), Ok(0xff));
        assert_eq!(r.i8("a"), Ok(-2));
        assert_eq!(r.u16("a"), Ok(0x0102));
        assert_eq!(r.i16("a"), Ok(-3));
        assert_eq!(r.u32("a"), Ok(0x0102_0304));
        assert_eq!(r.i32("a"), Ok(-4));
        assert_eq!(r.u64("a"), Ok(256));
        assert_eq!(r.i64("a"), Ok(-5));
        assert!(r.is_empty());
        assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn short_input_at_each_width_is_an_error() {
        let bytes = [0u8; 7];
        for left in 0..bytes.len() {
            let mut r = Reader::new(&bytes[..left]);
            if left < 1 {
                assert_eq!(r.u8("u8"), Err(short("u8", 1, left)));
                assert_eq!(r.i8("i8"), Err(short("i8", 1, left)));
            }
            if left < 2 {
                assert_eq!(r.u16("u16"), Err(short("u16", 2, left)));
                assert_eq!(r.i16("i16"), Err(short("i16", 2, left)));
            }
            if left < 4 {
                assert_eq!(r.u32("u32"), Err(short("u32", 4, left)));
                assert_eq!(r.i32("i32"), Err(short("i32", 4, left)));
            }
            assert_eq!(r.u64("u64"), Err(short("u64", 8, left)));
            assert_eq!(r.i64("i64"), Err(short("i64", 8, left)));
            assert_eq!(r.take(left + 1, "take"), Err(short("take", left + 1, left)));
        }
    }

    #[test]
    fn take_splits_off_the_front() {
        let mut r = Reader::new(b"abcde");
        assert_eq!(r.take(2, "x"), Ok(&b"ab"[..]));
        assert_eq!(r.take(0, "x"), Ok(&b""[..]));
        assert_eq!(r.remaining(), 3);
        assert_eq!(r.take(3, "x"), Ok(&b"cde"[..]));
        assert!(r.is_empty());
    }

    #[test]
    fn strings_with_int16_and_uint32_lengths() {
        let mut r = Reader::new(b"\x00\x02ab\x00\x00\x00\x03cde\x00\x00");
        assert_eq!(r.str_i16("s"), Ok("ab"));
        assert_eq!(r.str_u32("s"), Ok("cde"));
        assert_eq!(r.bytes_i16("s"), Ok(&b""[..]));
        assert!(r.is_empty());
        let mut r = Reader::new(b"\x00\x00\x00\x01z");
        assert_eq!(r.bytes_u32("s"), Ok(&b"z"[..]));
    }

    #[test]
    fn strings_with_uint16_lengths() {
        // 0x8000 is a length here, not a negative one as with `str_i16`.
        let mut long = b"\x80\x00".to_vec();
        long.extend(std::iter::repeat_n(b'x', 0x8000));
        long.extend(b"\x00\x02ab\x00\x00");
        let mut r = Reader::new(&long);
        assert_eq!(r.str_u16("s").map(str::len), Ok(0x8000));
        assert_eq!(r.str_u16("s"), Ok("ab"));
        assert_eq!(r.str_u16("s"), Ok(""));
        assert!(r.is_empty());
        let mut r = Reader::new(b"\xff\xffab");
        assert_eq!(r.str_u16("member"), Err(short("member", 0xffff, 2)));
        let mut r = Reader::new(b"\x00");
        assert_eq!(r.str_u16("member"), Err(short("member", 2, 1)));
        let mut r = Reader::new(b"\x00\x01\xff");
        assert_eq!(
            r.str_u16("member"),
            Err(ReadError::NotUtf8 { what: "member" })
        );
    }

    #[test]
    fn a_length_beyond_the_buffer_is_short() {
        let mut r = Reader::new(b"\x00\x09ab");
        assert_eq!(r.str_i16("topic"), Err(short("topic", 9, 2)));
        let mut r = Reader::new(b"\xff\xff\xff\xffab");
        assert_eq!(
            r.bytes_u32("value"),
            Err(short("value", u32::MAX as usize, 2))
        );
        let mut r = Reader::new(b"\x00");
        assert_eq!(r.str_u32("value"), Err(short("value", 4, 1)));
    }

    #[test]
    fn a_negative_length_or_count_is_an_error() {
        let mut r = Reader::new(b"\xff\xffab");
        assert_eq!(
            r.str_i16("topic"),
            Err(ReadError::NegativeLength {
                what: "topic",
                len: -1
            })
        );
        let mut r = Reader::new(b"\x80\x00\x00\x00");
        assert_eq!(
            r.count_i32("topics", 2),
            Err(ReadError::NegativeLength {
                what: "topics",
                len: i64::from(i32::MIN)
            })
        );
    }

    #[test]
    fn a_count_is_checked_against_its_items_minimum_size() {
        let mut r = Reader::new(b"\x00\x00\x00\x02abcd");
        assert_eq!(r.count_i32("topics", 2), Ok(2));
        assert_eq!(r.remaining(), 4);
        let mut r = Reader::new(b"\x00\x00\x00\x03abcd");
        assert_eq!(r.count_i32("topics", 2), Err(short("topics", 6, 4)));
        let mut r = Reader::new(b"\x7f\xff\xff\xff");
        assert_eq!(
            r.count_i32("lags", usize::MAX),
            Err(short("lags", usize::MAX, 0))
        );
        // Items of no minimum size cannot be checked: the count is the caller's to bound.
        let mut r = Reader::new(b"\x00\x00\x00\x05");
        assert_eq!(r.count_i32("empty items", 0), Ok(5));
    }

    #[test]
    fn a_uint32_count_is_checked_against_its_items_minimum_size() {
        let mut r = Reader::new(b"\x00\x00\x00\x02abcd");
        assert_eq!(r.count_u32("members", 2), Ok(2));
        assert_eq!(r.remaining(), 4);
        let mut r = Reader::new(b"\x00\x00\x00\x03abcd");
        assert_eq!(r.count_u32("members", 2), Err(short("members", 6, 4)));
        // The top bit is part of the count, not a sign: a huge count, short.
        let mut r = Reader::new(b"\xff\xff\xff\xffab");
        assert_eq!(
            r.count_u32("leavers", 12),
            Err(short("leavers", 12 * u32::MAX as usize, 2))
        );
        let mut r = Reader::new(b"\x80\x00\x00\x00");
        assert_eq!(
            r.count_u32("tasks", usize::MAX),
            Err(short("tasks", usize::MAX, 0))
        );
        let mut r = Reader::new(b"\x00\x00\x01");
        assert_eq!(r.count_u32("members", 2), Err(short("members", 4, 3)));
        let mut r = Reader::new(b"\x00\x00\x00\x05");
        assert_eq!(r.count_u32("empty items", 0), Ok(5));
    }

    #[test]
    fn fits_checks_a_computed_count_without_reading() {
        let r = Reader::new(b"abcdefgh");
        assert_eq!(r.fits("owners", 2, 4), Ok(2));
        assert_eq!(r.fits("owners", 3, 4), Err(short("owners", 12, 8)));
        assert_eq!(
            r.fits("owners", usize::MAX, 4),
            Err(short("owners", usize::MAX, 8))
        );
        assert_eq!(r.remaining(), 8);
    }

    #[test]
    fn bad_utf8_is_an_error() {
        let mut r = Reader::new(b"\x00\x01\xff");
        assert_eq!(
            r.str_i16("topic"),
            Err(ReadError::NotUtf8 { what: "topic" })
        );
        let mut r = Reader::new(b"\x00\x00\x00\x01\xff");
        assert_eq!(r.str_u32("id"), Err(ReadError::NotUtf8 { what: "id" }));
    }

    #[test]
    fn errors_name_what_was_read() {
        assert_eq!(
            short("offset value", 8, 3).to_string(),
            "offset value is truncated (needs 8 more bytes, has 3)"
        );
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let mut r = Reader::new(&bytes);
            while !r.is_empty() {
                let before = r.remaining();
                let _ = r.count_i32("c", 3);
                let _ = r.count_u32("c", 3);
                let _ = r.str_u16("s");
                let _ = r.str_i16("s");
                let _ = r.str_u32("s");
                let _ = r.i64("i");
                let _ = r.u8("u");
                proptest::prop_assert!(r.remaining() < before);
            }
        }
    }
}
