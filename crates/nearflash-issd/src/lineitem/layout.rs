//! The fixed-width 150-byte TPC-H `lineitem` record (the paper's prototype scans "4-byte projection out of 150 B
//! records", §4.3). Integers little-endian; decimals as scaled integers; dates as days since 1970-01-01; text
//! fields fixed-size and space padded (CHAR) or zero padded with a length byte (VARCHAR):
//!
//! | offset | bytes | field             | encoding                                                  |
//! |-------:|------:|-------------------|-----------------------------------------------------------|
//! |      0 |     8 | `l_orderkey`      | i64                                                       |
//! |      8 |     8 | `l_partkey`       | i64, uniform on [1, 200 000 x SF] (dbgen)                 |
//! |     16 |     8 | `l_suppkey`       | i64                                                       |
//! |     24 |     8 | `l_extendedprice` | i64 cents (DECIMAL(15,2) x 100)                           |
//! |     32 |     4 | `l_linenumber`    | i32                                                       |
//! |     36 |     4 | `l_quantity`      | i32 hundredths (DECIMAL(15,2) x 100; dbgen draws 1..50)   |
//! |     40 |     4 | `l_discount`      | i32 hundredths (0..10 = 0.00..0.10)                       |
//! |     44 |     4 | `l_tax`           | i32 hundredths (0..8)                                     |
//! |     48 |     4 | `l_shipdate`      | i32 days since 1970-01-01                                 |
//! |     52 |     4 | `l_commitdate`    | i32 days since 1970-01-01                                 |
//! |     56 |     4 | `l_receiptdate`   | i32 days since 1970-01-01                                 |
//! |     60 |     1 | `l_returnflag`    | ASCII                                                     |
//! |     61 |     1 | `l_linestatus`    | ASCII                                                     |
//! |     62 |    25 | `l_shipinstruct`  | CHAR(25), space padded                                    |
//! |     87 |    10 | `l_shipmode`      | CHAR(10), space padded                                    |
//! |     97 |    44 | `l_comment`       | VARCHAR(44), zero padded (dbgen comments are 10..43 B)    |
//! |    141 |     1 | `comment_len`     | u8, bytes used in `l_comment`                             |
//! |    142 |     8 | `row_id`          | u64, 0-based row number in the generated table            |
//!
//! `row_id` fills the 8 bytes a 142-byte row leaves of the 150 B budget; it lets tests and tools check that a
//! selection came back complete and in table order.

use crate::error::{invalid, Result};
use serde::{Deserialize, Serialize};

/// Bytes per lineitem record.
pub const RECORD_SIZE: usize = 150;

/// How a field's bytes are interpreted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    I64,
    I32,
    U8,
    U64,
    /// Fixed-size ASCII text (space or zero padded).
    Text,
}

macro_rules! fields {
    ($( $variant:ident = $name:literal, $off:literal, $width:literal, $kind:ident; )*) => {
        /// A column of the lineitem record.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum Field { $( #[serde(rename = $name)] $variant, )* }

        impl Field {
            /// Every field in record order.
            pub const ALL: &'static [Field] = &[$(Field::$variant,)*];

            /// Column name (`l_partkey`, ...).
            pub fn name(self) -> &'static str {
                match self { $(Field::$variant => $name,)* }
            }
            /// Byte offset inside the record.
            pub fn offset(self) -> usize {
                match self { $(Field::$variant => $off,)* }
            }
            /// Bytes the field takes.
            pub fn width(self) -> usize {
                match self { $(Field::$variant => $width,)* }
            }
            pub fn kind(self) -> FieldKind {
                match self { $(Field::$variant => FieldKind::$kind,)* }
            }
        }
    };
}

fields! {
    OrderKey = "l_orderkey", 0, 8, I64;
    PartKey = "l_partkey", 8, 8, I64;
    SuppKey = "l_suppkey", 16, 8, I64;
    ExtendedPrice = "l_extendedprice", 24, 8, I64;
    LineNumber = "l_linenumber", 32, 4, I32;
    Quantity = "l_quantity", 36, 4, I32;
    Discount = "l_discount", 40, 4, I32;
    Tax = "l_tax", 44, 4, I32;
    ShipDate = "l_shipdate", 48, 4, I32;
    CommitDate = "l_commitdate", 52, 4, I32;
    ReceiptDate = "l_receiptdate", 56, 4, I32;
    ReturnFlag = "l_returnflag", 60, 1, Text;
    LineStatus = "l_linestatus", 61, 1, Text;
    ShipInstruct = "l_shipinstruct", 62, 25, Text;
    ShipMode = "l_shipmode", 87, 10, Text;
    Comment = "l_comment", 97, 44, Text;
    CommentLen = "comment_len", 141, 1, U8;
    RowId = "row_id", 142, 8, U64;
}

impl Field {
    pub fn from_name(name: &str) -> Result<Field> {
        Field::ALL
            .iter()
            .copied()
            .find(|f| f.name() == name)
            .ok_or_else(|| invalid(format!("unknown lineitem field {name:?}")))
    }

    /// The field's raw bytes inside a record.
    #[inline]
    pub fn bytes(self, record: &[u8]) -> &[u8] {
        &record[self.offset()..self.offset() + self.width()]
    }

    /// The field as an integer (numeric fields only; `None` for text).
    #[inline]
    pub fn int(self, record: &[u8]) -> Option<i64> {
        match self.kind() {
            FieldKind::Text => None,
            kind => Some(read_int(record, self.offset(), kind)),
        }
    }
}

/// Reads an integer of `kind` at `off` (hot path of scans: the caller has resolved the field once).
/// Text kinds read as 0; `record` must hold the field (records are always 150 B).
#[inline(always)]
pub fn read_int(record: &[u8], off: usize, kind: FieldKind) -> i64 {
    fn arr<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
        let mut a = [0u8; N];
        a.copy_from_slice(&b[off..off + N]);
        a
    }
    match kind {
        FieldKind::I64 => i64::from_le_bytes(arr(record, off)),
        FieldKind::I32 => i64::from(i32::from_le_bytes(arr(record, off))),
        FieldKind::U8 => i64::from(record[off]),
        FieldKind::U64 => u64::from_le_bytes(arr(record, off)) as i64,
        FieldKind::Text => 0,
    }
}

/// One lineitem row in decoded form (scaled integers as stored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineitemRow {
    pub orderkey: i64,
    pub partkey: i64,
    pub suppkey: i64,
    pub extendedprice_cents: i64,
    pub linenumber: i32,
    pub quantity_hundredths: i32,
    pub discount_hundredths: i32,
    pub tax_hundredths: i32,
    pub shipdate_days: i32,
    pub commitdate_days: i32,
    pub receiptdate_days: i32,
    pub returnflag: u8,
    pub linestatus: u8,
    pub shipinstruct: String,
    pub shipmode: String,
    pub comment: String,
    pub row_id: u64,
}

fn put_text(out: &mut [u8], field: Field, text: &[u8], pad: u8) {
    let dst = &mut out[field.offset()..field.offset() + field.width()];
    let n = text.len().min(dst.len());
    dst[..n].copy_from_slice(&text[..n]);
    dst[n..].fill(pad);
}

fn text_of(record: &[u8], field: Field, len: usize) -> String {
    String::from_utf8_lossy(&field.bytes(record)[..len.min(field.width())]).into_owned()
}

impl LineitemRow {
    /// Writes the row into a 150-byte record (text truncated to its field width).
    pub fn encode_into(&self, out: &mut [u8]) {
        assert_eq!(out.len(), RECORD_SIZE, "lineitem record buffer must be {RECORD_SIZE} B");
        let mut put = |f: Field, b: &[u8]| out[f.offset()..f.offset() + b.len()].copy_from_slice(b);
        put(Field::OrderKey, &self.orderkey.to_le_bytes());
        put(Field::PartKey, &self.partkey.to_le_bytes());
        put(Field::SuppKey, &self.suppkey.to_le_bytes());
        put(Field::ExtendedPrice, &self.extendedprice_cents.to_le_bytes());
        put(Field::LineNumber, &self.linenumber.to_le_bytes());
        put(Field::Quantity, &self.quantity_hundredths.to_le_bytes());
        put(Field::Discount, &self.discount_hundredths.to_le_bytes());
        put(Field::Tax, &self.tax_hundredths.to_le_bytes());
        put(Field::ShipDate, &self.shipdate_days.to_le_bytes());
        put(Field::CommitDate, &self.commitdate_days.to_le_bytes());
        put(Field::ReceiptDate, &self.receiptdate_days.to_le_bytes());
        put(Field::ReturnFlag, &[self.returnflag]);
        put(Field::LineStatus, &[self.linestatus]);
        put(Field::RowId, &self.row_id.to_le_bytes());
        let comment = self.comment.as_bytes();
        out[Field::CommentLen.offset()] = comment.len().min(Field::Comment.width()) as u8;
        put_text(out, Field::ShipInstruct, self.shipinstruct.as_bytes(), b' ');
        put_text(out, Field::ShipMode, self.shipmode.as_bytes(), b' ');
        put_text(out, Field::Comment, comment, 0);
    }

    /// Reads a row back from a record.
    pub fn decode(record: &[u8]) -> Result<LineitemRow> {
        if record.len() != RECORD_SIZE {
            return Err(invalid(format!("lineitem record of {} B, expected {RECORD_SIZE}", record.len())));
        }
        let int = |f: Field| f.int(record).expect("numeric field");
        let trim = |f: Field| {
            let b = f.bytes(record);
            let len = b.iter().rposition(|&c| c != b' ').map_or(0, |i| i + 1);
            text_of(record, f, len)
        };
        Ok(LineitemRow {
            orderkey: int(Field::OrderKey),
            partkey: int(Field::PartKey),
            suppkey: int(Field::SuppKey),
            extendedprice_cents: int(Field::ExtendedPrice),
            linenumber: int(Field::LineNumber) as i32,
            quantity_hundredths: int(Field::Quantity) as i32,
            discount_hundredths: int(Field::Discount) as i32,
            tax_hundredths: int(Field::Tax) as i32,
            shipdate_days: int(Field::ShipDate) as i32,
            commitdate_days: int(Field::CommitDate) as i32,
            receiptdate_days: int(Field::ReceiptDate) as i32,
            returnflag: record[Field::ReturnFlag.offset()],
            linestatus: record[Field::LineStatus.offset()],
            shipinstruct: trim(Field::ShipInstruct),
            shipmode: trim(Field::ShipMode),
            comment: text_of(record, Field::Comment, record[Field::CommentLen.offset()] as usize),
            row_id: int(Field::RowId) as u64,
        })
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (for predicates such as Q6's ship-date year).
pub fn days_from_civil(year: i32, month: u32, day: u32) -> i32 {
    // Howard Hinnant's algorithm: shift the year to start in March so leap days fall at the end.
    let y = year - i32::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = month as i32;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + day as i32 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_tile_the_record_exactly() {
        let mut end = 0;
        for f in Field::ALL {
            assert_eq!(f.offset(), end, "{} must follow the previous field", f.name());
            end += f.width();
            assert_eq!(Field::from_name(f.name()).unwrap(), *f);
        }
        assert_eq!(end, RECORD_SIZE);
        assert!(Field::from_name("l_nothing").is_err());
    }

    #[test]
    fn rows_round_trip() {
        let row = LineitemRow {
            orderkey: 7,
            partkey: 155_190,
            suppkey: 7706,
            extendedprice_cents: 2_116_823,
            linenumber: 1,
            quantity_hundredths: 1700,
            discount_hundredths: 4,
            tax_hundredths: 2,
            shipdate_days: days_from_civil(1996, 3, 13),
            commitdate_days: days_from_civil(1996, 2, 12),
            receiptdate_days: days_from_civil(1996, 3, 22),
            returnflag: b'N',
            linestatus: b'O',
            shipinstruct: "DELIVER IN PERSON".into(),
            shipmode: "TRUCK".into(),
            comment: "egular courts above the".into(),
            row_id: 0,
        };
        let mut rec = [0u8; RECORD_SIZE];
        row.encode_into(&mut rec);
        assert_eq!(LineitemRow::decode(&rec).unwrap(), row);
        assert_eq!(Field::Quantity.int(&rec), Some(1700));
        assert_eq!(Field::ShipMode.int(&rec), None);
        assert!(LineitemRow::decode(&rec[..149]).is_err());
    }

    #[test]
    fn civil_days_match_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(1992, 1, 1), 8035); // tpchgen's UNIX_EPOCH_OFFSET
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(1995, 1, 1) - days_from_civil(1994, 1, 1), 365);
    }
}
