//! `nearflash-cognitive-eval`: the retrieval figures on Fashion-MNIST with a trained model: int8 vs float bit
//! agreement, K-NN graph build time, precision@T (brute force, plain and two-hop graph search) and flash pages per
//! query. Prints one JSON object. `--db N` and `--queries N` take subsets.

use nearflash_cognitive::fmnist::{self, Part};
use nearflash_cognitive::gse::SearchConfig;
use nearflash_cognitive::model::{shipped_path, Model};
use nearflash_cognitive::params::CognitiveParams;
use nearflash_cognitive::quant::QModel;
use nearflash_cognitive::{knn, retrieval};
use std::time::Instant;

fn main() {
    if let Err(e) = run() {
        eprintln!("nearflash-cognitive-eval: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let (mut model_path, mut db, mut queries, mut calib) = (shipped_path(), 60_000usize, 10_000usize, 1000usize);
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().ok_or(format!("{k} needs a value"))?;
        match k.as_str() {
            "--model" => model_path = v.into(),
            "--db" => db = v.parse()?,
            "--queries" => queries = v.parse()?,
            "--calibration" => calib = v.parse()?,
            other => return Err(format!("unknown argument {other:?}; --model PATH --db N --queries N --calibration N").into()),
        }
    }
    let p = CognitiveParams::default();
    let m = Model::load(&model_path)?;
    let bits = m.network.bits()? as u32;
    let dir = fmnist::default_dir();
    let train = fmnist::load(&dir, Part::Train)?.head(db);
    let test = fmnist::load(&dir, Part::Test)?.head(queries);
    let t0 = Instant::now();
    let cal: Vec<&[u8]> = (0..calib.min(train.len())).map(|i| train.image(i)).collect();
    let q = QModel::quantise(&m, &cal)?;
    let db_codes = retrieval::hash_int8(&q, &train)?;
    let q_codes = retrieval::hash_int8(&q, &test)?;
    let hash_s = t0.elapsed().as_secs_f64();
    let db_float = retrieval::hash_float(&m, &train)?;
    let q_float = retrieval::hash_float(&m, &test)?;
    let agree_db = retrieval::bit_agreement(&db_codes, &db_float, bits);
    let agree_q = retrieval::bit_agreement(&q_codes, &q_float, bits);
    let t1 = Instant::now();
    let g = knn::build(&db_codes, bits, p.k_nbors as usize, 1)?;
    let knn_s = t1.elapsed().as_secs_f64();
    let cfg = SearchConfig::from_params(&p);
    let t2 = Instant::now();
    let ts: Vec<usize> = [200, 400, 600, 800, 1000].into_iter().filter(|&t| t <= train.len()).collect();
    let rows = retrieval::precision_at(&g, &db_codes, &train.labels, bits, p.page_size as usize, &q_codes, &test.labels, &ts, &cfg)?;
    let search_s = t2.elapsed().as_secs_f64();
    let out = serde_json::json!({
        "model": model_path.display().to_string(),
        "model_metadata": m.metadata,
        "bits": bits,
        "database": train.len(),
        "queries": test.len(),
        "bit_agreement_int8_vs_float": {"database": agree_db, "queries": agree_q},
        "seconds": {"hash_int8": hash_s, "knn_graph": knn_s, "search_all_t": search_s},
        "precision": rows,
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
