//! Property tests: every kernel's answer is the same whatever the page size, the chunking, the order in which
//! partials reach Reduce, and whether partials travel through their byte encoding — and equals a naive serial
//! reference written here independently of the kernels.

use nearflash_issd::datagen;
use nearflash_issd::kernel::grep::GrepParams;
use nearflash_issd::kernel::kmeans::KMeansParams;
use nearflash_issd::kernel::string_match::{logical_offset, StringMatchParams};
use nearflash_issd::kernel::word_count::WordCountParams;
use nearflash_issd::kernel::{run_parallel, run_serial, Chunk, Kernel, KernelSpec, Output, Partial};
use nearflash_issd::lineitem::{generate_records, CommentPool, LineitemSpec, RECORD_SIZE};
use nearflash_issd::pages::{pack_lines, pack_records, unpack, PageLayout};
use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// Maps random runs of pages, ships each partial through its encoding, merges them in a random order.
fn run_scrambled(kernel: &dyn Kernel, data: &[u8], seed: u64) -> Output {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let ps = kernel.layout().page_size();
    let pages = data.len() / ps;
    let mut partials = Vec::new();
    let mut first = 0;
    while first < pages {
        let n = rng.gen_range(1..=4).min(pages - first);
        let p = kernel.map(Chunk::new(first as u64, &data[first * ps..(first + n) * ps])).unwrap();
        let bytes = p.encode();
        assert_eq!(bytes.len(), p.encoded_len());
        partials.push(Partial::decode(&bytes).unwrap());
        first += n;
    }
    partials.shuffle(&mut rng);
    let mut acc = kernel.empty();
    for p in partials {
        kernel.merge(&mut acc, p).unwrap();
    }
    let out = kernel.finish(acc).unwrap();
    assert_eq!(Output::decode(&out.encode()).unwrap(), out, "output encoding round trip");
    out
}

/// The three ways of running must agree; returns the answer.
fn answer(spec: &KernelSpec, layout: PageLayout, data: &[u8], seed: u64) -> Output {
    let k = spec.build(layout).unwrap();
    let serial = run_serial(k.as_ref(), data).unwrap().output;
    assert_eq!(run_scrambled(k.as_ref(), data, seed), serial);
    assert_eq!(run_parallel(k.as_ref(), data, 3).unwrap().output, serial);
    serial
}

fn lineitem() -> &'static [u8] {
    static DATA: OnceLock<Vec<u8>> = OnceLock::new();
    DATA.get_or_init(|| generate_records(&LineitemSpec::rows(3000).with_comment_pool(CommentPool::Compact)).unwrap())
}

fn text() -> &'static [u8] {
    static DATA: OnceLock<Vec<u8>> = OnceLock::new();
    DATA.get_or_init(|| datagen::text(40_000, 11))
}

fn lines(t: &[u8]) -> impl Iterator<Item = &[u8]> {
    t.split(|&c| c == b'\n').filter(|l| !l.is_empty())
}

fn naive_count(hay: &[u8], key: &[u8]) -> Vec<usize> {
    let (mut i, mut at) = (0, Vec::new());
    while i + key.len() <= hay.len() {
        if &hay[i..i + key.len()] == key {
            at.push(i);
            i += key.len();
        } else {
            i += 1;
        }
    }
    at
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn scan_selects_and_projects_like_a_row_loop(page in 160usize..3000, seed: u64, t in 0i64..200_000) {
        let layout = PageLayout::new(page).unwrap();
        let data = pack_records(layout, lineitem(), RECORD_SIZE).unwrap();
        let spec = KernelSpec::from_json(&format!(
            r#"{{"kernel":"scan","conditions":[{{"field":"l_partkey","max":{t}}}],"projection":["l_quantity","l_shipdate"]}}"#
        )).unwrap();
        let Output::Selection(o) = answer(&spec, layout, &data, seed) else { panic!() };
        let mut expect = Vec::new();
        for r in lineitem().chunks(RECORD_SIZE) {
            if i64::from_le_bytes(r[8..16].try_into().unwrap()) <= t {
                expect.extend_from_slice(&r[36..40]);
                expect.extend_from_slice(&r[48..52]);
            }
        }
        prop_assert_eq!(o.scanned, 3000);
        prop_assert_eq!(o.items as usize, expect.len() / 8);
        prop_assert_eq!(o.bytes, expect);
    }

    #[test]
    fn q6_sums_like_a_row_loop(page in 160usize..3000, seed: u64) {
        let layout = PageLayout::new(page).unwrap();
        let data = pack_records(layout, lineitem(), RECORD_SIZE).unwrap();
        let Output::Aggregate(a) = answer(&KernelSpec::from_json(r#"{"kernel":"filter_sum"}"#).unwrap(), layout, &data, seed)
            else { panic!() };
        let i32_at = |r: &[u8], o: usize| i32::from_le_bytes(r[o..o + 4].try_into().unwrap());
        let (lo, hi) = (8766, 9131); // 1994-01-01 and 1995-01-01 as days since 1970-01-01
        let mut sum = 0i128;
        for r in lineitem().chunks(RECORD_SIZE) {
            let (ship, disc, qty) = (i32_at(r, 48), i32_at(r, 40), i32_at(r, 36));
            if ship >= lo && ship < hi && (5..=7).contains(&disc) && qty < 2400 {
                sum += i128::from(i64::from_le_bytes(r[24..32].try_into().unwrap())) * i128::from(disc);
            }
        }
        prop_assert_eq!(a.sum, sum);
    }

    #[test]
    fn grep_returns_the_lines_a_line_loop_finds(page in 128usize..2048, seed: u64, pick in 0usize..6) {
        let pats = [("furiously", false), ("deposits", false), ("zzzz", false),
                    (r"^(?:the|a)\b", true), (r"ironic\s+\w+ly$", true), (r"[0-9]", true)];
        let (pat, is_re) = pats[pick];
        let layout = PageLayout::new(page).unwrap();
        let data = pack_lines(layout, text()).unwrap();
        let spec = KernelSpec::Grep(GrepParams { pattern: pat.into(), regex: is_re });
        let Output::Selection(o) = answer(&spec, layout, &data, seed) else { panic!() };
        let re = regex::bytes::Regex::new(pat).unwrap();
        let mut expect = Vec::new();
        for l in lines(text()) {
            let hit = if is_re { re.is_match(l) } else { l.windows(pat.len()).any(|w| w == pat.as_bytes()) };
            if hit {
                expect.extend_from_slice(l);
                expect.push(b'\n');
            }
        }
        prop_assert_eq!(o.scanned as usize, lines(text()).count());
        prop_assert_eq!(o.bytes, expect);
    }

    #[test]
    fn string_match_counts_and_locates_like_a_byte_loop(page in 128usize..2048, seed: u64) {
        let keys = ["the", "furiously", "ss", "quickly ironic", "qqqq"];
        let layout = PageLayout::new(page).unwrap();
        let data = pack_lines(layout, text()).unwrap();
        let spec = KernelSpec::StringMatch(StringMatchParams { keys: keys.iter().map(|k| k.to_string()).collect(), locate: true });
        let Output::Matches(m) = answer(&spec, layout, &data, seed) else { panic!() };
        let flat = unpack(layout, &data).unwrap();
        for (k, got) in keys.iter().zip(&m.keys) {
            let at = naive_count(&flat, k.as_bytes());
            prop_assert_eq!(got.count as usize, at.len());
            let pos: Vec<usize> = got.positions.iter()
                .map(|&(p, o)| logical_offset(layout, &data, p, o).unwrap() as usize).collect();
            prop_assert_eq!(pos, at);
        }
    }

    #[test]
    fn word_count_counts_like_a_split(page in 128usize..2048, seed: u64) {
        let layout = PageLayout::new(page).unwrap();
        let data = pack_lines(layout, text()).unwrap();
        let spec = KernelSpec::WordCount(WordCountParams { top: None });
        let Output::WordCounts(o) = answer(&spec, layout, &data, seed) else { panic!() };
        let mut expect: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
        for w in text().split(|c| !c.is_ascii_alphabetic()).filter(|w| !w.is_empty()) {
            *expect.entry(w.to_ascii_lowercase()).or_default() += 1;
        }
        let got: BTreeMap<Vec<u8>, u64> = o.words.into_iter().collect();
        prop_assert_eq!(got, expect);
    }

    #[test]
    fn histogram_counts_like_a_pixel_loop(page in 64usize..2048, seed: u64, w in 1usize..90, h in 1usize..90) {
        let px = datagen::pixels(w, h, seed).unwrap();
        let layout = PageLayout::new(page).unwrap();
        let data = pack_records(layout, &px, 3).unwrap();
        let Output::Histogram(hist) = answer(&KernelSpec::from_json(r#"{"kernel":"histogram"}"#).unwrap(), layout, &data, seed)
            else { panic!() };
        let mut expect = [[0u64; 256]; 3];
        for (i, &b) in px.iter().enumerate() {
            expect[i % 3][b as usize] += 1;
        }
        prop_assert_eq!(*hist.0, expect);
    }

    #[test]
    fn linear_regression_fits_like_float_sums(page in 64usize..2048, seed: u64, n in 2usize..20_000) {
        let pts = datagen::regression_points(n, seed);
        let layout = PageLayout::new(page).unwrap();
        let data = pack_records(layout, &pts, 2).unwrap();
        let Output::Regression(o) = answer(&KernelSpec::from_json(r#"{"kernel":"linear_regression"}"#).unwrap(), layout, &data, seed)
            else { panic!() };
        let (mut sx, mut sy, mut sxx, mut sxy) = (0f64, 0f64, 0f64, 0f64);
        for p in pts.chunks(2) {
            let (x, y) = (f64::from(p[0]), f64::from(p[1]));
            sx += x; sy += y; sxx += x * x; sxy += x * y;
        }
        let nf = n as f64;
        let den = nf * sxx - sx * sx;
        prop_assume!(den.abs() > 1e-6);
        let slope = (nf * sxy - sx * sy) / den;
        prop_assert!((o.slope.unwrap() - slope).abs() <= 1e-9 * slope.abs().max(1.0));
        prop_assert!((o.intercept.unwrap() - (sy - slope * sx) / nf).abs() < 1e-6);
    }

    #[test]
    fn kmeans_step_matches_a_naive_lloyd_step(page in 64usize..2048, seed: u64, k in 1usize..6, dim in 1usize..5) {
        let pts = datagen::cluster_points(3000, dim, 4, seed).unwrap();
        let layout = PageLayout::new(page.max(4 * dim + 4)).unwrap();
        let data = pack_records(layout, &pts, 4 * dim).unwrap();
        let points: Vec<Vec<i64>> = pts.chunks(4 * dim)
            .map(|p| p.chunks(4).map(|v| i64::from(i32::from_le_bytes(v.try_into().unwrap()))).collect()).collect();
        let mut cents: Vec<Vec<i64>> = points[..k].to_vec();
        for _ in 0..3 {
            let params = KMeansParams { dim, centroids: cents.iter().map(|c| c.iter().map(|&v| v as i32).collect()).collect() };
            let Output::Clusters(step) = answer(&KernelSpec::KMeans(params), layout, &data, seed) else { panic!() };
            let mut sums = vec![vec![0i64; dim]; k];
            let mut counts = vec![0u64; k];
            for p in &points {
                let d = |c: &Vec<i64>| -> i64 { p.iter().zip(c).map(|(a, b)| (a - b) * (a - b)).sum() };
                let best = (0..k).min_by_key(|&j| (d(&cents[j]), j)).unwrap();
                counts[best] += 1;
                for (s, v) in sums[best].iter_mut().zip(p) { *s += v; }
            }
            let next: Vec<Vec<i64>> = (0..k).map(|j| if counts[j] == 0 { cents[j].clone() } else {
                sums[j].iter().map(|s| s.div_euclid(counts[j] as i64)).collect() }).collect();
            prop_assert_eq!(&step.counts, &counts);
            let got: Vec<Vec<i64>> = step.centroid_rows().iter().map(|c| c.iter().map(|&v| i64::from(v)).collect()).collect();
            prop_assert_eq!(&got, &next);
            cents = next;
        }
    }
}
