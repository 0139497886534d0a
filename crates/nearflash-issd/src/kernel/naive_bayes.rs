//! naive_bayes (NU-MineBench's Bayesian classifier, Table 1) over labelled records ([`super::labelled`]): every
//! attribute is categorical with `values` levels. Two passes, both Map/Reduce:
//!
//! * **training** (no `model`): Map counts records per class and per (class, attribute, value); Reduce adds the
//!   tables; the answer is the model (the counts).
//! * **classification** (`model` = a training answer's counts): each record gets the class of highest log
//!   posterior with Laplace smoothing, `ln((n_c + 1) / (n + C)) + Σ_a ln((n_{c,a,v} + 1) / (n_c + V))` (summed in
//!   attribute order, ties to the lowest class); Map counts (true class, predicted class) pairs, so the answer
//!   is the confusion matrix.
//!
//! Counts are exact integers, so any chunking gives the same model and the same predictions.

use super::labelled::Shape;
use super::tally::Tally;
use super::{Chunk, Kernel, Output, Partial};
use crate::codec::{varint_len, Body, Reader, Writer};
use crate::error::{invalid, malformed, IssdError, Result};
use crate::pages::PageLayout;
use serde::{Deserialize, Serialize};

/// A trained model: records per class and counts per (class, attribute, value), class-major.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NaiveBayesModel {
    pub class_counts: Vec<u64>,
    pub counts: Vec<u64>,
}

/// Parameters of `naive_bayes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NaiveBayesParams {
    pub attributes: usize,
    pub classes: usize,
    /// Levels of every attribute (values 0..values; 1..=256).
    pub values: usize,
    /// Classify with this model; absent: train.
    #[serde(default)]
    pub model: Option<NaiveBayesModel>,
}

/// The answer: the model (training) or the confusion matrix (classification, `true x predicted`, row-major).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NaiveBayesOutput {
    pub attributes: usize,
    pub classes: usize,
    pub values: usize,
    pub model: NaiveBayesModel,
    pub confusion: Vec<u64>,
}

fn list_len(v: &[u64]) -> usize {
    varint_len(v.len() as u64) + v.iter().map(|&c| varint_len(c)).sum::<usize>()
}

fn write_list(w: &mut Writer, v: &[u64]) {
    w.varint(v.len() as u64);
    v.iter().for_each(|&c| w.varint(c));
}

fn read_list(r: &mut Reader<'_>) -> Result<Vec<u64>> {
    let n = r.count(1)?;
    (0..n).map(|_| r.varint()).collect()
}

impl Body for NaiveBayesOutput {
    fn body_len(&self) -> usize {
        [self.attributes, self.classes, self.values].iter().map(|&v| varint_len(v as u64)).sum::<usize>()
            + list_len(&self.model.class_counts)
            + list_len(&self.model.counts)
            + list_len(&self.confusion)
    }
    fn encode_body(&self, w: &mut Writer) {
        [self.attributes, self.classes, self.values].iter().for_each(|&v| w.varint(v as u64));
        write_list(w, &self.model.class_counts);
        write_list(w, &self.model.counts);
        write_list(w, &self.confusion);
    }
    fn decode_body(r: &mut Reader<'_>) -> Result<Self> {
        let (attributes, classes, values) = (r.varint()? as usize, r.varint()? as usize, r.varint()? as usize);
        let model = NaiveBayesModel { class_counts: read_list(r)?, counts: read_list(r)? };
        Ok(Self { attributes, classes, values, model, confusion: read_list(r)? })
    }
}

/// Log tables of a model (Laplace smoothed).
#[derive(Debug, Clone)]
struct LogModel {
    prior: Vec<f64>,
    /// ln P(value | class) per (class, attribute, value), class-major.
    likelihood: Vec<f64>,
}

/// One naive_bayes pass over labelled-record pages.
#[derive(Debug, Clone)]
pub struct NaiveBayesKernel {
    layout: PageLayout,
    shape: Shape,
    values: usize,
    model: Option<LogModel>,
}

impl NaiveBayesKernel {
    pub fn new(params: &NaiveBayesParams, layout: PageLayout) -> Result<Self> {
        let shape = Shape::new(params.attributes, params.classes, layout)?;
        let (a, c, v) = (params.attributes, params.classes, params.values);
        if !(1..=256).contains(&v) {
            return Err(invalid(format!("values must be 1..=256, got {v}")));
        }
        super::labelled::check_table(c * a * v + c.max(c * c), "naive_bayes (classes x attributes x values)")?;
        let model = match &params.model {
            None => None,
            Some(m) => {
                if m.class_counts.len() != c || m.counts.len() != c * a * v {
                    return Err(invalid(format!(
                        "model of {} class counts and {} counts; {c} classes x {a} attributes x {v} values need \
                         {c} and {}",
                        m.class_counts.len(),
                        m.counts.len(),
                        c * a * v
                    )));
                }
                let n: f64 = m.class_counts.iter().map(|&x| x as f64).sum();
                let prior = m.class_counts.iter().map(|&nc| ((nc as f64 + 1.0) / (n + c as f64)).ln()).collect();
                let likelihood = m
                    .counts
                    .iter()
                    .enumerate()
                    .map(|(i, &k)| ((k as f64 + 1.0) / (m.class_counts[i / (a * v)] as f64 + v as f64)).ln())
                    .collect();
                Some(LogModel { prior, likelihood })
            }
        };
        Ok(Self { layout, shape, values: v, model })
    }

    fn table_len(&self) -> usize {
        let (a, c) = (self.shape.attributes, self.shape.classes);
        match self.model {
            None => c + c * a * self.values,
            Some(_) => c * c,
        }
    }

    fn check(&self, values: &[u8]) -> Result<()> {
        match values.iter().find(|&&x| x as usize >= self.values) {
            Some(x) => Err(malformed(format!("attribute value {x} outside 0..{}", self.values))),
            None => Ok(()),
        }
    }

    /// The class of highest log posterior (ties to the lowest).
    fn predict(&self, m: &LogModel, values: &[u8]) -> usize {
        let (a, v) = (self.shape.attributes, self.values);
        let (mut best, mut best_s) = (0, f64::NEG_INFINITY);
        for (c, &prior) in m.prior.iter().enumerate() {
            let row = &m.likelihood[c * a * v..(c + 1) * a * v];
            let mut s = prior;
            for (i, &x) in values.iter().enumerate() {
                s += row[i * v + x as usize];
            }
            if s > best_s {
                (best, best_s) = (c, s);
            }
        }
        best
    }
}

impl Kernel for NaiveBayesKernel {
    fn name(&self) -> &str {
        "naive_bayes"
    }
    fn layout(&self) -> PageLayout {
        self.layout
    }
    fn empty(&self) -> Partial {
        Partial::Tally(Tally::zeros(self.table_len()))
    }
    fn map(&self, chunk: Chunk<'_>) -> Result<Partial> {
        let (a, c, v) = (self.shape.attributes, self.shape.classes, self.values);
        let mut t = Tally::zeros(self.table_len());
        let counts = &mut t.0;
        match &self.model {
            None => self.shape.for_each(self.layout, chunk.bytes, |values, class| {
                self.check(values)?;
                counts[class] += 1;
                let base = c + class * a * v;
                for (i, &x) in values.iter().enumerate() {
                    counts[base + i * v + x as usize] += 1;
                }
                Ok(())
            })?,
            Some(m) => self.shape.for_each(self.layout, chunk.bytes, |values, class| {
                self.check(values)?;
                counts[class * c + self.predict(m, values)] += 1;
                Ok(())
            })?,
        }
        Ok(Partial::Tally(t))
    }
    fn merge(&self, acc: &mut Partial, p: Partial) -> Result<()> {
        match (&*acc, &p) {
            (Partial::Tally(x), Partial::Tally(y)) if x.0.len() == self.table_len() && y.0.len() == x.0.len() => {
                acc.merge(p)
            }
            _ => Err(IssdError::PartialMismatch(format!("naive_bayes got a {} partial of another shape", p.kind()))),
        }
    }
    fn finish(&self, p: Partial) -> Result<Output> {
        let Partial::Tally(t) = p else {
            return Err(p.wrong_kind(self.name()));
        };
        if t.0.len() != self.table_len() {
            return Err(IssdError::PartialMismatch("naive_bayes partial of another shape".into()));
        }
        let (attributes, classes, values) = (self.shape.attributes, self.shape.classes, self.values);
        let mut out = NaiveBayesOutput { attributes, classes, values, ..Default::default() };
        match self.model {
            None => {
                let mut counts = t.0;
                out.model.counts = counts.split_off(classes);
                out.model.class_counts = counts;
            }
            Some(_) => out.confusion = t.0,
        }
        Ok(Output::NaiveBayes(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{run_chunked, run_serial};
    use crate::pages::pack_records;

    fn params(model: Option<NaiveBayesModel>) -> NaiveBayesParams {
        NaiveBayesParams { attributes: 2, classes: 2, values: 3, model }
    }

    #[test]
    fn trains_counts_and_classifies_separable_records() {
        let layout = PageLayout::new(64).unwrap();
        // class 0 has attribute values 0, class 1 has 2; one noisy record each
        let recs: Vec<u8> = [[0, 0, 0], [0, 0, 0], [0, 1, 0], [2, 2, 1], [2, 2, 1], [1, 2, 1]].concat();
        let pages = pack_records(layout, &recs, 3).unwrap();
        let train = NaiveBayesKernel::new(&params(None), layout).unwrap();
        let r = run_chunked(&train, &pages, 1).unwrap();
        assert_eq!(r.output, run_serial(&train, &pages).unwrap().output);
        let Output::NaiveBayes(o) = r.output else { panic!("naive_bayes") };
        assert_eq!(o.model.class_counts, vec![3, 3]);
        // class 0: attribute 0 -> [3, 0, 0], attribute 1 -> [2, 1, 0]; class 1: [0, 1, 2], [0, 0, 3]
        assert_eq!(o.model.counts, vec![3, 0, 0, 2, 1, 0, 0, 1, 2, 0, 0, 3]);
        let out = Output::NaiveBayes(o.clone());
        assert_eq!(Output::decode(&out.encode()).unwrap(), out);
        let classify = NaiveBayesKernel::new(&params(Some(o.model)), layout).unwrap();
        let Output::NaiveBayes(c) = run_chunked(&classify, &pages, 2).unwrap().output else { panic!() };
        assert_eq!(c.confusion, vec![3, 0, 0, 3]);
    }

    #[test]
    fn bad_parameters_and_records_are_errors() {
        let layout = PageLayout::new(64).unwrap();
        assert!(NaiveBayesKernel::new(&NaiveBayesParams { values: 0, ..params(None) }, layout).is_err());
        assert!(NaiveBayesKernel::new(&NaiveBayesParams { values: 257, ..params(None) }, layout).is_err());
        assert!(NaiveBayesKernel::new(&NaiveBayesParams { classes: 1, ..params(None) }, layout).is_err());
        assert!(NaiveBayesKernel::new(&NaiveBayesParams { attributes: 0, ..params(None) }, layout).is_err());
        let huge = NaiveBayesParams { attributes: 1000, classes: 256, values: 256, model: None };
        assert!(NaiveBayesKernel::new(&huge, PageLayout::new(8192).unwrap()).is_err(), "table too large");
        let short = NaiveBayesModel { class_counts: vec![1, 1], counts: vec![0; 11] };
        assert!(NaiveBayesKernel::new(&params(Some(short)), layout).is_err());
        let k = NaiveBayesKernel::new(&params(None), layout).unwrap();
        let bad_value = pack_records(layout, &[3, 0, 0], 3).unwrap();
        assert!(matches!(k.map(Chunk::new(0, &bad_value)), Err(IssdError::MalformedData(_))));
        let bad_class = pack_records(layout, &[0, 0, 2], 3).unwrap();
        assert!(matches!(k.map(Chunk::new(0, &bad_class)), Err(IssdError::MalformedData(_))));
        let mut acc = k.empty();
        assert!(k.merge(&mut acc, Partial::Tally(Tally::zeros(3))).is_err());
        assert!(k.finish(Partial::Tally(Tally::zeros(3))).is_err());
    }
}
