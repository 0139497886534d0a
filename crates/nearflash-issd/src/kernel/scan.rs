//! Database scan over lineitem pages (the paper's PostgreSQL scan, §4.3 and Table 1): a conjunction of range
//! conditions on integer columns, then either a projection of the matching rows (`scan`) or a sum over them
//! (`filter_sum`, e.g. TPC-H Q6: `sum(l_extendedprice * l_discount)` for one ship year, discount 0.05..0.07,
//! quantity < 24).
//!
//! Default scan: 1% selectivity with a 4-byte projection, as the prototype. The predicate is `l_partkey <= t`:
//! dbgen draws `l_partkey` uniformly on [1, P] (P = 200 000 x SF), so P(l_partkey <= t) = t / P and
//! t = round(selectivity x P) gives the requested selectivity in expectation (the measured one is reported).

use super::partial::Mergeable;
use super::selection::Selection;
use super::{Chunk, Kernel, Output, Partial};
use crate::codec::{varint_len, Body, Reader, Writer};
use crate::error::{invalid, Result};
use crate::lineitem::layout::read_int;
use crate::lineitem::{days_from_civil, Field, FieldKind, RECORD_SIZE};
use crate::pages::PageLayout;
use serde::{Deserialize, Serialize};

/// `min <= field <= max` (either bound optional) on an integer column, in its stored units.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    pub field: Field,
    #[serde(default)]
    pub min: Option<i64>,
    #[serde(default)]
    pub max: Option<i64>,
}

/// Parameters of `scan`: select rows meeting every condition, return the projected columns' raw bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScanParams {
    #[serde(default = "default_conditions")]
    pub conditions: Vec<Condition>,
    #[serde(default = "default_projection")]
    pub projection: Vec<Field>,
}

/// Default selectivity of `scan` (the prototype's 1%, §4.3).
pub const DEFAULT_SELECTIVITY: f64 = 0.01;

fn default_conditions() -> Vec<Condition> {
    ScanParams::with_selectivity(DEFAULT_SELECTIVITY, 200_000).expect("valid default").conditions
}

fn default_projection() -> Vec<Field> {
    vec![Field::Quantity]
}

impl Default for ScanParams {
    fn default() -> Self {
        Self { conditions: default_conditions(), projection: default_projection() }
    }
}

impl ScanParams {
    /// `l_partkey <= round(selectivity x partkey_max)`, projecting the 4-byte `l_quantity`.
    pub fn with_selectivity(selectivity: f64, partkey_max: i64) -> Result<Self> {
        if !(0.0..=1.0).contains(&selectivity) || partkey_max < 1 {
            return Err(invalid(format!(
                "selectivity {selectivity} must be in [0, 1] and partkey_max {partkey_max} positive"
            )));
        }
        let t = (selectivity * partkey_max as f64).round() as i64;
        Ok(Self {
            conditions: vec![Condition { field: Field::PartKey, min: None, max: Some(t) }],
            projection: default_projection(),
        })
    }
}

/// Parameters of `filter_sum`: over rows meeting every condition, sum the product of `product`'s columns.
/// Fields left out take TPC-H Q6's values (`{"kernel": "filter_sum"}` is Q6 with its validation parameters).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FilterSumParams {
    pub conditions: Vec<Condition>,
    pub product: Vec<Field>,
}

impl Default for FilterSumParams {
    fn default() -> Self {
        Self::tpch_q6(1994, 6, 24)
    }
}

impl FilterSumParams {
    /// TPC-H Q6: ship date in `year`, discount within 0.01 of `discount_hundredths`/100, quantity below
    /// `quantity`; sums `l_extendedprice * l_discount` (unit: 1e-4 currency, cents x hundredths).
    pub fn tpch_q6(year: i32, discount_hundredths: i64, quantity: i64) -> Self {
        let cond = |field, min, max| Condition { field, min, max };
        Self {
            conditions: vec![
                cond(
                    Field::ShipDate,
                    Some(days_from_civil(year, 1, 1).into()),
                    Some((days_from_civil(year + 1, 1, 1) - 1).into()),
                ),
                cond(Field::Discount, Some(discount_hundredths - 1), Some(discount_hundredths + 1)),
                cond(Field::Quantity, None, Some(quantity * 100 - 1)),
            ],
            product: vec![Field::ExtendedPrice, Field::Discount],
        }
    }
}

/// A condition compiled to offsets and an inclusive range.
#[derive(Debug, Clone, Copy)]
struct Compiled {
    off: usize,
    kind: FieldKind,
    min: i64,
    max: i64,
}

/// A conjunction of conditions, checked per record.
#[derive(Debug, Clone)]
struct Predicate(Vec<Compiled>);

fn numeric(field: Field, what: &str) -> Result<Field> {
    if field.kind() == FieldKind::Text {
        return Err(invalid(format!("{what} needs an integer column, {} is text", field.name())));
    }
    Ok(field)
}

impl Predicate {
    fn compile(conditions: &[Condition]) -> Result<Self> {
        let mut out = Vec::with_capacity(conditions.len());
        for c in conditions {
            let field = numeric(c.field, "a condition")?;
            out.push(Compiled {
                off: field.offset(),
                kind: field.kind(),
                min: c.min.unwrap_or(i64::MIN),
                max: c.max.unwrap_or(i64::MAX),
            });
        }
        Ok(Self(out))
    }

    #[inline]
    fn matches(&self, rec: &[u8]) -> bool {
        self.0.iter().all(|c| {
            let v = read_int(rec, c.off, c.kind);
            c.min <= v && v <= c.max
        })
    }
}

/// Walks every record of a chunk of lineitem pages.
fn for_each_record(layout: PageLayout, chunk: &[u8], mut f: impl FnMut(&[u8])) -> Result<()> {
    for payload in layout.record_payloads(chunk, RECORD_SIZE)? {
        payload?.chunks_exact(RECORD_SIZE).for_each(&mut f);
    }
    Ok(())
}

/// Selection + projection over lineitem pages.
#[derive(Debug, Clone)]
pub struct ScanKernel {
    layout: PageLayout,
    predicate: Predicate,
    projection: Vec<(usize, usize)>,
}

impl ScanKernel {
    pub fn new(params: &ScanParams, layout: PageLayout) -> Result<Self> {
        layout.records_per_page(RECORD_SIZE)?;
        if params.projection.is_empty() {
            return Err(invalid("scan needs at least one projected column"));
        }
        Ok(Self {
            layout,
            predicate: Predicate::compile(&params.conditions)?,
            projection: params.projection.iter().map(|f| (f.offset(), f.width())).collect(),
        })
    }

    /// Bytes of one projected row.
    pub fn row_width(&self) -> usize {
        self.projection.iter().map(|p| p.1).sum()
    }
}

impl Kernel for ScanKernel {
    fn name(&self) -> &str {
        "scan"
    }
    fn layout(&self) -> PageLayout {
        self.layout
    }
    fn empty(&self) -> Partial {
        Partial::Selection(Selection::default())
    }
    fn map(&self, chunk: Chunk<'_>) -> Result<Partial> {
        Selection::map_chunk(self.layout, chunk, |bytes| {
            let (mut scanned, mut items) = (0u64, 0u64);
            for_each_record(self.layout, chunk.bytes, |rec| {
                scanned += 1;
                if self.predicate.matches(rec) {
                    items += 1;
                    for &(off, w) in &self.projection {
                        bytes.extend_from_slice(&rec[off..off + w]);
                    }
                }
            })?;
            Ok((scanned, items))
        })
    }
    fn finish(&self, p: Partial) -> Result<Output> {
        Selection::finish_partial(self.name(), p)
    }
}

/// Result of `filter_sum`: rows examined, rows matched, exact sum of the products.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Aggregate {
    pub scanned: u64,
    pub matched: u64,
    pub sum: i128,
}

impl Mergeable for Aggregate {
    fn merge(&mut self, o: Self) -> Result<()> {
        self.scanned += o.scanned;
        self.matched += o.matched;
        self.sum += o.sum;
        Ok(())
    }
}

impl Body for Aggregate {
    fn body_len(&self) -> usize {
        varint_len(self.scanned) + varint_len(self.matched) + 16
    }
    fn encode_body(&self, w: &mut Writer) {
        w.varint(self.scanned);
        w.varint(self.matched);
        w.i128(self.sum);
    }
    fn decode_body(r: &mut Reader<'_>) -> Result<Self> {
        Ok(Self { scanned: r.varint()?, matched: r.varint()?, sum: r.i128()? })
    }
}

/// Filter + aggregate over lineitem pages.
#[derive(Debug, Clone)]
pub struct FilterSumKernel {
    layout: PageLayout,
    predicate: Predicate,
    product: Vec<(usize, FieldKind)>,
}

impl FilterSumKernel {
    pub fn new(params: &FilterSumParams, layout: PageLayout) -> Result<Self> {
        layout.records_per_page(RECORD_SIZE)?;
        if params.product.is_empty() {
            return Err(invalid("filter_sum needs at least one column in its product"));
        }
        for f in &params.product {
            numeric(*f, "filter_sum's product")?;
        }
        let product = params.product.iter().map(|f| (f.offset(), f.kind())).collect();
        Ok(Self { layout, predicate: Predicate::compile(&params.conditions)?, product })
    }
}

impl Kernel for FilterSumKernel {
    fn name(&self) -> &str {
        "filter_sum"
    }
    fn layout(&self) -> PageLayout {
        self.layout
    }
    fn empty(&self) -> Partial {
        Partial::Aggregate(Aggregate::default())
    }
    fn map(&self, chunk: Chunk<'_>) -> Result<Partial> {
        let mut agg = Aggregate::default();
        for_each_record(self.layout, chunk.bytes, |rec| {
            agg.scanned += 1;
            if self.predicate.matches(rec) {
                agg.matched += 1;
                agg.sum +=
                    self.product.iter().map(|&(off, kind)| i128::from(read_int(rec, off, kind))).product::<i128>();
            }
        })?;
        Ok(Partial::Aggregate(agg))
    }
    fn finish(&self, p: Partial) -> Result<Output> {
        match p {
            Partial::Aggregate(a) => Ok(Output::Aggregate(a)),
            other => Err(other.wrong_kind(self.name())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::run_serial;
    use crate::lineitem::{decode_pages, generate_pages, CommentPool, LineitemSpec};

    fn data(rows: u64) -> (PageLayout, Vec<u8>) {
        let layout = PageLayout::new(8192).unwrap();
        let spec = LineitemSpec::rows(rows).with_comment_pool(CommentPool::Compact);
        (layout, generate_pages(&spec, layout).unwrap())
    }

    #[test]
    fn default_scan_selects_about_one_percent_and_projects_four_bytes() {
        let (layout, pages) = data(20_000);
        let k = ScanKernel::new(&ScanParams::default(), layout).unwrap();
        assert_eq!(k.row_width(), 4);
        let Output::Selection(out) = run_serial(&k, &pages).unwrap().output else { panic!("selection") };
        assert_eq!(out.scanned, 20_000);
        let sel = out.items as f64 / out.scanned as f64;
        assert!((0.0075..0.0125).contains(&sel), "selectivity {sel}");
        let rows = decode_pages(layout, &pages).unwrap();
        let expect: Vec<u8> =
            rows.iter().filter(|r| r.partkey <= 2000).flat_map(|r| r.quantity_hundredths.to_le_bytes()).collect();
        assert_eq!(out.bytes, expect);
    }

    #[test]
    fn q6_matches_a_decoded_reference() {
        let (layout, pages) = data(30_000);
        let k = FilterSumKernel::new(&FilterSumParams::default(), layout).unwrap();
        let Output::Aggregate(a) = run_serial(&k, &pages).unwrap().output else { panic!("aggregate") };
        let (lo, hi) = (days_from_civil(1994, 1, 1), days_from_civil(1995, 1, 1));
        let rows = decode_pages(layout, &pages).unwrap();
        let hits: Vec<_> = rows
            .iter()
            .filter(|r| r.shipdate_days >= lo && r.shipdate_days < hi)
            .filter(|r| (5..=7).contains(&r.discount_hundredths) && r.quantity_hundredths < 2400)
            .collect();
        assert!(!hits.is_empty());
        assert_eq!(a.matched, hits.len() as u64);
        let sum: i128 =
            hits.iter().map(|r| i128::from(r.extendedprice_cents) * i128::from(r.discount_hundredths)).sum();
        assert_eq!(a.sum, sum);
    }

    #[test]
    fn bad_parameters_are_errors() {
        let layout = PageLayout::new(8192).unwrap();
        assert!(ScanParams::with_selectivity(1.5, 10).is_err());
        let text_cond = ScanParams {
            conditions: vec![Condition { field: Field::ShipMode, min: None, max: None }],
            projection: vec![Field::Quantity],
        };
        assert!(ScanKernel::new(&text_cond, layout).is_err());
        assert!(ScanKernel::new(&ScanParams { projection: vec![], ..Default::default() }, layout).is_err());
        assert!(ScanKernel::new(&ScanParams::default(), PageLayout::new(128).unwrap()).is_err());
        let bad_sum = FilterSumParams { conditions: vec![], product: vec![Field::Comment] };
        assert!(FilterSumKernel::new(&bad_sum, layout).is_err());
    }
}
