//! Property tests of Table 1's NU-MineBench kernels (naive_bayes, scalparc, hop): the same answer whatever the page
//! size, chunking and merge order (partials shipped through their byte encoding), counts equal to a naive count
//! written here, and arbitrary bytes handed to the decoders or the kernels never panic.

use nearflash_issd::datagen;
use nearflash_issd::kernel::{run_serial, Chunk, KernelSpec, Output, Partial};
use nearflash_issd::pages::{pack_records, PageLayout};
use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Random page runs, partials through their encoding, merged in a random order; must equal the serial answer.
fn scrambled_equals_serial(spec: &str, layout: PageLayout, data: &[u8], seed: u64) -> Output {
    let k = KernelSpec::from_json(spec).unwrap().build(layout).unwrap();
    let ps = layout.page_size();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let (pages, mut first, mut parts) = (data.len() / ps, 0, Vec::new());
    while first < pages {
        let n = rng.gen_range(1..=4).min(pages - first);
        let p = k.map(Chunk::new(first as u64, &data[first * ps..(first + n) * ps])).unwrap();
        parts.push(Partial::decode(&p.encode()).unwrap());
        first += n;
    }
    parts.shuffle(&mut rng);
    let mut acc = k.empty();
    for p in parts {
        k.merge(&mut acc, p).unwrap();
    }
    let out = k.finish(acc).unwrap();
    assert_eq!(out, run_serial(k.as_ref(), data).unwrap().output);
    assert_eq!(Output::decode(&out.encode()).unwrap(), out);
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn naive_bayes_counts_like_a_naive_count(page in 64usize..2048, seed: u64, attrs in 1usize..6, classes in 2usize..5) {
        let recs = datagen::labelled_records(2000, attrs, classes, 8, seed).unwrap();
        let layout = PageLayout::new(page).unwrap();
        let data = pack_records(layout, &recs, attrs + 1).unwrap();
        let spec = format!(r#"{{"kernel":"naive_bayes","attributes":{attrs},"classes":{classes},"values":8}}"#);
        let Output::NaiveBayes(o) = scrambled_equals_serial(&spec, layout, &data, seed) else { panic!() };
        let mut counts = vec![0u64; classes * attrs * 8];
        let mut cc = vec![0u64; classes];
        for r in recs.chunks(attrs + 1) {
            let c = r[attrs] as usize;
            cc[c] += 1;
            for a in 0..attrs { counts[(c * attrs + a) * 8 + r[a] as usize] += 1; }
        }
        prop_assert_eq!(&o.model.class_counts, &cc);
        prop_assert_eq!(&o.model.counts, &counts);
    }

    #[test]
    fn scalparc_and_hop_ignore_chunking(page in 64usize..2048, seed: u64, grid in 1usize..20, threshold in 1u64..10) {
        let layout = PageLayout::new(page).unwrap();
        let recs = datagen::labelled_records(3000, 3, 3, 256, seed).unwrap();
        let data = pack_records(layout, &recs, 4).unwrap();
        let spec = r#"{"kernel":"scalparc","attributes":3,"classes":3,"path":[{"attribute":0,"threshold":128,"left":true}]}"#;
        let Output::Split(s) = scrambled_equals_serial(spec, layout, &data, seed) else { panic!() };
        let reach = recs.chunks(4).filter(|r| r[0] <= 128).count() as u64;
        prop_assert_eq!(s.class_counts.iter().sum::<u64>(), reach);
        let pts = datagen::cluster_points(3000, 3, 3, seed).unwrap();
        let data = pack_records(layout, &pts, 12).unwrap();
        let spec = format!(r#"{{"kernel":"hop","grid":{grid},"lo":100,"hi":900,"threshold":{threshold}}}"#);
        let Output::Halos(h) = scrambled_equals_serial(&spec, layout, &data, seed) else { panic!() };
        let grouped: u64 = h.groups.iter().map(|g| g.particles).sum();
        prop_assert_eq!(grouped + h.below + h.outside, 3000);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600), tag in 8u8..11) {
        let mut tagged = vec![tag];
        tagged.extend(&bytes);
        let _ = Output::decode(&tagged);
        let layout = PageLayout::new(64).unwrap();
        for spec in [
            r#"{"kernel":"naive_bayes","attributes":3,"classes":2,"values":4}"#,
            r#"{"kernel":"scalparc","attributes":3,"classes":2}"#,
            r#"{"kernel":"hop","grid":4,"lo":0,"hi":100}"#,
        ] {
            let k = KernelSpec::from_json(spec).unwrap().build(layout).unwrap();
            // tags 8 and 9 are the tally and cell partials; a decoded one of the wrong shape must be refused
            if let Ok(p) = Partial::decode(&tagged) {
                let mut acc = k.empty();
                if k.merge(&mut acc, p).is_ok() {
                    let _ = k.finish(acc);
                }
            }
            let whole = bytes.len() / 64 * 64;
            let _ = k.map(Chunk::new(0, &bytes[..whole]));
        }
    }
}
