//! What the candle trainers share: their command line (`--out`, `--epochs`, `--batch`, `--lr`, `--seed`,
//! `--limit`, `--data`, plus each trainer's own keys), Fashion-MNIST batches as tensors (pixels / 255), the
//! seeded AdamW loop with cross-entropy, and test accuracy. Reproducible: batches come from a permutation drawn
//! from the seed, and the weights' start values are the caller's (drawn from the same seed).

use candle_core::{DType, Device, Tensor, Var, D};
use candle_nn::{Optimizer, ParamsAdamW};
use nearflash_cognitive::fmnist::{self, Part, Split, PIXELS};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use std::time::Instant;

/// The options every trainer takes.
#[derive(Debug, Clone)]
pub struct Common {
    pub out: String,
    pub epochs: usize,
    pub batch: usize,
    pub lr: f64,
    pub seed: u64,
    pub limit: usize,
    pub data: Option<String>,
}

/// Parses the command line: the common keys here, any other `--key value` through `extra` (which returns
/// `Ok(false)` for a key it does not know). Checks the common values' ranges.
pub fn parse_args(
    args: impl IntoIterator<Item = String>,
    epochs: usize,
    mut extra: impl FnMut(&str, String) -> Result<bool, String>,
) -> Result<Common, String> {
    let mut a = Common { out: String::new(), epochs, batch: 64, lr: 1e-3, seed: 1, limit: 0, data: None };
    let mut it = args.into_iter();
    while let Some(k) = it.next() {
        let v = it.next().ok_or_else(|| format!("{k} needs a value"))?;
        match k.as_str() {
            "--out" => a.out = v,
            "--epochs" => a.epochs = number(&v, "--epochs")? as usize,
            "--batch" => a.batch = number(&v, "--batch")? as usize,
            "--lr" => a.lr = number(&v, "--lr")?,
            "--seed" => a.seed = number(&v, "--seed")? as u64,
            "--limit" => a.limit = number(&v, "--limit")? as usize,
            "--data" => a.data = Some(v),
            other => {
                if !extra(other, v)? {
                    return Err(format!("unknown argument {other:?}"));
                }
            }
        }
    }
    if a.out.is_empty() {
        return Err("--out PATH is required".into());
    }
    if a.epochs == 0 || a.batch == 0 || !(a.lr > 0.0 && a.lr < 1.0) {
        return Err("--epochs and --batch must be positive, --lr in (0, 1)".into());
    }
    Ok(a)
}

/// A non-negative number, or an error naming the argument.
pub fn number(s: &str, what: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("{what}: {s:?} is not a non-negative number")),
    }
}

/// The training and test splits (the first `limit` images of each when `limit > 0`: a quick run is judged on as
/// many test images).
pub fn load_splits(a: &Common) -> Result<(Split, Split), Box<dyn std::error::Error>> {
    let dir = a.data.clone().map_or_else(fmnist::default_dir, Into::into);
    let (mut train, mut test) = (fmnist::load(&dir, Part::Train)?, fmnist::load(&dir, Part::Test)?);
    if a.limit > 0 {
        train = train.head(a.limit);
        test = test.head(a.limit);
    }
    Ok((train, test))
}

/// Images `idx` of `split` as an (n, 1, 28, 28) tensor of pixels / 255, and their labels.
pub fn batch(split: &Split, idx: &[usize], dev: &Device) -> candle_core::Result<(Tensor, Tensor)> {
    let mut px = Vec::with_capacity(idx.len() * PIXELS);
    for &i in idx {
        px.extend(split.image(i).iter().map(|&v| v as f32 / 255.0));
    }
    let labels: Vec<u32> = idx.iter().map(|&i| split.labels[i] as u32).collect();
    Ok((Tensor::from_vec(px, (idx.len(), 1, 28, 28), dev)?, Tensor::from_vec(labels, idx.len(), dev)?))
}

/// Fraction of `split` whose largest logit (`logits(images)`) is the label.
pub fn accuracy(
    split: &Split,
    dev: &Device,
    logits: impl Fn(&Tensor) -> candle_core::Result<Tensor>,
) -> candle_core::Result<f64> {
    let mut right = 0usize;
    let all: Vec<usize> = (0..split.len()).collect();
    for chunk in all.chunks(500) {
        let (x, y) = batch(split, chunk, dev)?;
        let pred = logits(&x)?.argmax(D::Minus1)?;
        right += pred.eq(&y)?.to_dtype(DType::U32)?.sum_all()?.to_scalar::<u32>()? as usize;
    }
    Ok(right as f64 / split.len().max(1) as f64)
}

/// Trains `vars` with AdamW (weight decay 0) on cross-entropy of `logits(images)` for `a.epochs` epochs of
/// seeded shuffled batches; returns the seconds it took. Prints each epoch's mean loss to stderr.
pub fn fit(
    vars: Vec<Var>,
    train: &Split,
    a: &Common,
    dev: &Device,
    logits: impl Fn(&Tensor) -> candle_core::Result<Tensor>,
) -> candle_core::Result<f64> {
    let mut opt = candle_nn::AdamW::new(vars, ParamsAdamW { lr: a.lr, weight_decay: 0.0, ..Default::default() })?;
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(a.seed);
    let t0 = Instant::now();
    for epoch in 0..a.epochs {
        let mut order: Vec<usize> = (0..train.len()).collect();
        order.shuffle(&mut rng);
        let (mut loss_sum, mut n) = (0.0f64, 0usize);
        for chunk in order.chunks(a.batch) {
            let (x, y) = batch(train, chunk, dev)?;
            let loss = candle_nn::loss::cross_entropy(&logits(&x)?, &y)?;
            opt.backward_step(&loss)?;
            loss_sum += loss.to_scalar::<f32>()? as f64;
            n += 1;
        }
        eprintln!("epoch {} loss {:.4} ({:.0} s)", epoch + 1, loss_sum / n.max(1) as f64, t0.elapsed().as_secs_f64());
    }
    Ok(t0.elapsed().as_secs_f64())
}

/// Runs a trainer's `main`: usage and exit status 2 on a bad command line, exit status 1 on a failure.
pub fn main_with<A>(
    name: &str,
    usage: &str,
    parse: impl FnOnce() -> Result<A, String>,
    run: impl FnOnce(A) -> Result<(), Box<dyn std::error::Error>>,
) {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{name}: {e}\nusage: {usage}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(a) {
        eprintln!("{name}: {e}");
        std::process::exit(1);
    }
}
