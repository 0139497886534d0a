//! TPC-H `lineitem` as the iSSD scan input: a fixed-width 150-byte record ([`layout`]) generated with the dbgen
//! algorithm of the `tpchgen` crate ([`generate`]) and packed into flash pages (see [`crate::pages`]).

pub mod columnar;
pub mod generate;
pub mod layout;

pub use columnar::{columnar_from_records, ColumnarLayout};
pub use generate::{generate_pages, generate_records, CommentPool, LineitemSpec, ORDERS_PER_SF, PARTS_PER_SF};
pub use layout::{days_from_civil, Field, FieldKind, LineitemRow, RECORD_SIZE};

use crate::error::Result;
use crate::pages::PageLayout;

/// Decodes every record of a paged lineitem stream (test and tooling helper).
pub fn decode_pages(layout: PageLayout, data: &[u8]) -> Result<Vec<LineitemRow>> {
    let mut rows = Vec::new();
    for payload in layout.record_payloads(data, RECORD_SIZE)? {
        for rec in payload?.chunks_exact(RECORD_SIZE) {
            rows.push(LineitemRow::decode(rec)?);
        }
    }
    Ok(rows)
}
