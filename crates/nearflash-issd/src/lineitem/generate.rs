//! Generates TPC-H `lineitem` with the `tpchgen` crate (the dbgen algorithm, so the same scale factor gives the
//! same rows as dbgen) and encodes it as 150-byte records, optionally packed into pages. Deterministic: the table
//! is generated in parts of whole orders on the rayon pool and concatenated in order, so the bytes do not depend
//! on the thread count.

use super::layout::{Field, RECORD_SIZE};
use crate::error::{invalid, Result};
use crate::pages::{pack_records, PageLayout};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;
use tpchgen::distribution::Distributions;
use tpchgen::generators::{LineItem, LineItemGenerator};
use tpchgen::text::TextPool;

/// Orders per unit of scale factor (TPC-H spec; lineitem has 1..7 lines per order, about 4 on average).
pub const ORDERS_PER_SF: f64 = 1_500_000.0;
/// Parts per unit of scale factor: `l_partkey` is uniform on [1, PARTS_PER_SF x SF] (TPC-H spec, dbgen).
pub const PARTS_PER_SF: f64 = 200_000.0;
/// Orders generated per parallel task (about 64 k rows, 10 MB of records).
const ORDERS_PER_PART: i64 = 16_384;
/// Size of the compact comment pool (the standard pool is 300 MiB).
const COMPACT_POOL_BYTES: i32 = 1 << 20;
/// Refuse to materialise more record bytes than this in memory.
const MAX_RECORD_BYTES: f64 = 8.0 * (1u64 << 30) as f64;

/// Which text pool `l_comment` is drawn from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommentPool {
    /// dbgen's 300 MiB pool: comments identical to dbgen's (costs 300 MiB and about a second to build once).
    #[default]
    Standard,
    /// A 1 MiB pool of the same TPC-H grammar: every other column identical to dbgen, comments differ.
    Compact,
}

impl CommentPool {
    fn pool(self) -> &'static TextPool {
        match self {
            CommentPool::Standard => TextPool::get_or_init_default(),
            CommentPool::Compact => compact_text_pool(),
        }
    }
}

/// A 1 MiB TPC-H grammar text pool (built once; also the word source of the text generator).
pub fn compact_text_pool() -> &'static TextPool {
    static POOL: OnceLock<TextPool> = OnceLock::new();
    POOL.get_or_init(|| TextPool::new(COMPACT_POOL_BYTES, Distributions::static_default()))
}

/// What to generate: the lineitem table at `scale_factor`, or only its first `max_rows` rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LineitemSpec {
    pub scale_factor: f64,
    #[serde(default)]
    pub max_rows: Option<u64>,
    #[serde(default)]
    pub comment_pool: CommentPool,
}

impl LineitemSpec {
    /// The whole table at a scale factor (SF 1 is about 6.0 M rows, 900 MB of records).
    pub fn scale_factor(sf: f64) -> Self {
        Self { scale_factor: sf, max_rows: None, comment_pool: CommentPool::Standard }
    }

    /// The first `rows` rows of the SF-1 table (so `l_partkey` stays uniform on [1, 200 000]).
    pub fn rows(rows: u64) -> Self {
        Self { scale_factor: 1.0, max_rows: Some(rows), comment_pool: CommentPool::Standard }
    }

    pub fn with_comment_pool(mut self, pool: CommentPool) -> Self {
        self.comment_pool = pool;
        self
    }

    /// Largest `l_partkey` of this scale factor.
    pub fn partkey_max(&self) -> i64 {
        (PARTS_PER_SF * self.scale_factor) as i64
    }

    fn validate(&self) -> Result<i64> {
        let sf = self.scale_factor;
        if !(sf.is_finite() && sf > 0.0) {
            return Err(invalid(format!("scale factor must be positive, got {sf}")));
        }
        let orders = (ORDERS_PER_SF * sf) as i64;
        if orders < 1 || self.partkey_max() < 1 {
            return Err(invalid(format!("scale factor {sf} yields no orders/parts")));
        }
        // about 4 rows per order
        let rows = self.max_rows.map_or(orders as f64 * 4.0, |r| r as f64);
        if rows * RECORD_SIZE as f64 > MAX_RECORD_BYTES {
            return Err(invalid(format!("about {rows:.0} rows exceed the in-memory limit of 8 GiB")));
        }
        Ok(orders)
    }
}

/// Encodes one tpchgen row into a 150-byte record (row_id is set by the caller).
fn encode_tpch(li: &LineItem<'_>, out: &mut [u8]) {
    let mut put = |f: Field, b: &[u8]| out[f.offset()..f.offset() + b.len()].copy_from_slice(b);
    put(Field::OrderKey, &li.l_orderkey.to_le_bytes());
    put(Field::PartKey, &li.l_partkey.to_le_bytes());
    put(Field::SuppKey, &li.l_suppkey.to_le_bytes());
    put(Field::ExtendedPrice, &li.l_extendedprice.0.to_le_bytes());
    put(Field::LineNumber, &li.l_linenumber.to_le_bytes());
    put(Field::Quantity, &((li.l_quantity * 100) as i32).to_le_bytes());
    put(Field::Discount, &(li.l_discount.0 as i32).to_le_bytes());
    put(Field::Tax, &(li.l_tax.0 as i32).to_le_bytes());
    put(Field::ShipDate, &li.l_shipdate.to_unix_epoch().to_le_bytes());
    put(Field::CommitDate, &li.l_commitdate.to_unix_epoch().to_le_bytes());
    put(Field::ReceiptDate, &li.l_receiptdate.to_unix_epoch().to_le_bytes());
    put(Field::ReturnFlag, &li.l_returnflag.as_bytes()[..1]);
    put(Field::LineStatus, &li.l_linestatus.as_bytes()[..1]);
    let text = |out: &mut [u8], f: Field, s: &str, pad: u8| {
        let dst = &mut out[f.offset()..f.offset() + f.width()];
        let n = s.len().min(dst.len());
        dst[..n].copy_from_slice(&s.as_bytes()[..n]);
        dst[n..].fill(pad);
        n
    };
    text(out, Field::ShipInstruct, li.l_shipinstruct, b' ');
    text(out, Field::ShipMode, li.l_shipmode, b' ');
    let n = text(out, Field::Comment, li.l_comment, 0);
    out[Field::CommentLen.offset()] = n as u8;
}

/// Records of one part (1-based) of `part_count`.
fn generate_part(sf: f64, part: i32, part_count: i32, pool: &'static TextPool) -> Vec<u8> {
    let generator = LineItemGenerator::new_with_distributions_and_text_pool(
        sf,
        part,
        part_count,
        Distributions::static_default(),
        pool,
    );
    let mut out = Vec::with_capacity(ORDERS_PER_PART as usize * 4 * RECORD_SIZE);
    let mut rec = [0u8; RECORD_SIZE];
    for li in generator.iter() {
        encode_tpch(&li, &mut rec);
        out.extend_from_slice(&rec);
    }
    out
}

/// Generates contiguous 150-byte records (row ids 0..n in table order).
pub fn generate_records(spec: &LineitemSpec) -> Result<Vec<u8>> {
    let orders = spec.validate()?;
    let pool = spec.comment_pool.pool();
    let part_count = i32::try_from(((orders + ORDERS_PER_PART - 1) / ORDERS_PER_PART).max(1))
        .map_err(|_| invalid("scale factor too large"))?;
    let limit = spec.max_rows.map(|r| r as usize * RECORD_SIZE);
    let mut records = Vec::new();
    let mut next_part = 1;
    // Waves of parts until enough rows: the whole table when unlimited, else about what the limit needs.
    while next_part <= part_count && limit.is_none_or(|l| records.len() < l) {
        let wave = match limit {
            None => part_count - next_part + 1,
            Some(l) => {
                let missing_rows = (l - records.len()) / RECORD_SIZE;
                let parts = missing_rows as f64 / (ORDERS_PER_PART as f64 * 3.5);
                (parts.ceil() as i32).clamp(1, part_count - next_part + 1)
            }
        };
        let parts: Vec<Vec<u8>> = (next_part..next_part + wave)
            .into_par_iter()
            .map(|p| generate_part(spec.scale_factor, p, part_count, pool))
            .collect();
        for p in parts {
            records.extend_from_slice(&p);
        }
        next_part += wave;
    }
    if let Some(l) = limit {
        if records.len() < l {
            return Err(invalid(format!(
                "SF {} has only {} rows, {} requested",
                spec.scale_factor,
                records.len() / RECORD_SIZE,
                l / RECORD_SIZE
            )));
        }
        records.truncate(l);
    }
    let off = Field::RowId.offset();
    records.par_chunks_mut(RECORD_SIZE).enumerate().for_each(|(i, r)| {
        r[off..off + 8].copy_from_slice(&(i as u64).to_le_bytes());
    });
    Ok(records)
}

/// Generates the records packed into pages of `layout` (records never straddle a page).
pub fn generate_pages(spec: &LineitemSpec, layout: PageLayout) -> Result<Vec<u8>> {
    layout.records_per_page(RECORD_SIZE)?;
    pack_records(layout, &generate_records(spec)?, RECORD_SIZE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lineitem::layout::{days_from_civil, LineitemRow};

    fn small(rows: u64) -> LineitemSpec {
        LineitemSpec::rows(rows).with_comment_pool(CommentPool::Compact)
    }

    #[test]
    fn first_rows_match_dbgen() {
        let recs = generate_records(&small(8)).unwrap();
        assert_eq!(recs.len(), 8 * RECORD_SIZE);
        let r0 = LineitemRow::decode(&recs[..RECORD_SIZE]).unwrap();
        // dbgen SF 1, first line: 1|155190|7706|1|17|21168.23|0.04|0.02|N|O|1996-03-13|1996-02-12|1996-03-22|
        //                         DELIVER IN PERSON|TRUCK|...
        assert_eq!((r0.orderkey, r0.partkey, r0.suppkey, r0.linenumber), (1, 155_190, 7706, 1));
        assert_eq!((r0.quantity_hundredths, r0.extendedprice_cents), (1700, 2_116_823));
        assert_eq!((r0.discount_hundredths, r0.tax_hundredths), (4, 2));
        assert_eq!((r0.returnflag, r0.linestatus), (b'N', b'O'));
        assert_eq!(r0.shipdate_days, days_from_civil(1996, 3, 13));
        assert_eq!(r0.commitdate_days, days_from_civil(1996, 2, 12));
        assert_eq!(r0.receiptdate_days, days_from_civil(1996, 3, 22));
        assert_eq!((r0.shipinstruct.as_str(), r0.shipmode.as_str()), ("DELIVER IN PERSON", "TRUCK"));
        assert!((10..=43).contains(&r0.comment.len()));
        for (i, rec) in recs.chunks(RECORD_SIZE).enumerate() {
            assert_eq!(LineitemRow::decode(rec).unwrap().row_id, i as u64);
        }
    }

    #[test]
    fn row_limited_output_is_a_prefix_of_the_table_and_deterministic() {
        let spec = LineitemSpec { scale_factor: 0.01, max_rows: None, comment_pool: CommentPool::Compact };
        let all = generate_records(&spec).unwrap();
        let n = all.len() / RECORD_SIZE;
        assert!((55_000..65_000).contains(&n), "SF 0.01 has about 60 k rows, got {n}");
        let some = generate_records(&LineitemSpec { max_rows: Some(1000), ..spec.clone() }).unwrap();
        assert_eq!(&all[..some.len()], &some[..]);
        assert_eq!(generate_records(&spec).unwrap(), all);
        let too_many = LineitemSpec { max_rows: Some(n as u64 + 1), ..spec };
        assert!(generate_records(&too_many).is_err());
    }

    #[test]
    fn bad_specs_are_errors() {
        assert!(generate_records(&LineitemSpec::scale_factor(0.0)).is_err());
        assert!(generate_records(&LineitemSpec::scale_factor(f64::NAN)).is_err());
        assert!(generate_records(&LineitemSpec::scale_factor(1e5)).is_err());
        assert!(generate_pages(&small(10), PageLayout::new(128).unwrap()).is_err());
    }

    #[test]
    fn pages_hold_whole_records() {
        let layout = PageLayout::new(4096).unwrap();
        let pages = generate_pages(&small(100), layout).unwrap();
        assert_eq!(pages.len(), 4 * 4096); // 27 records per 4 KiB page
        let back = crate::pages::unpack(layout, &pages).unwrap();
        assert_eq!(back, generate_records(&small(100)).unwrap());
    }
}
