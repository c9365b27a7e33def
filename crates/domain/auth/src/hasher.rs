//! Password hashing with bounded memory and concurrency: a fixed set of
//! threads, one per core, each reusing one argon2 memory block, fed by a
//! bounded queue. Past the queue a hash is refused at once ([`AuthError::Busy`])
//! instead of piling up threads and 19 MiB blocks. A thread idle for
//! [`HashPool::IDLE_RELEASE`] gives its block back.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use argon2::password_hash::phc::{Output, ParamsString, PasswordHash, Salt};
use argon2::{Algorithm, Argon2, Block, Params, Version};
use rand::RngCore;
use subtle::ConstantTimeEq;
use tokio::sync::oneshot;

use crate::AuthError;

/// Work for a hashing thread; the answer goes back on the channel.
enum Job {
    Hash(String, oneshot::Sender<Result<String, String>>),
    Verify(String, Option<String>, oneshot::Sender<bool>),
}

/// The queue the threads take jobs from, and what they report.
struct Shared {
    jobs: Mutex<VecDeque<Job>>,
    ready: Condvar,
    capacity: usize,
    running: AtomicUsize,
    peak: AtomicUsize,
}

/// A fixed pool of argon2id threads behind a bounded queue.
#[derive(Clone)]
pub struct HashPool {
    shared: Arc<Shared>,
    threads: usize,
}

impl std::fmt::Debug for HashPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HashPool")
            .field("threads", &self.threads)
            .field("capacity", &self.shared.capacity)
            .finish()
    }
}

impl HashPool {
    /// How long a thread keeps its memory block with nothing to do.
    pub const IDLE_RELEASE: Duration = Duration::from_secs(2);
    /// Hashes waiting per thread before new ones are refused.
    pub const QUEUE_PER_THREAD: usize = 16;

    /// One thread per core, [`Self::QUEUE_PER_THREAD`] waiting hashes each.
    pub fn per_core() -> Self {
        let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        Self::new(threads, threads * Self::QUEUE_PER_THREAD)
    }

    /// `threads` hashing threads and at most `capacity` hashes waiting.
    pub fn new(threads: usize, capacity: usize) -> Self {
        let threads = threads.max(1);
        let shared = Arc::new(Shared {
            jobs: Mutex::new(VecDeque::with_capacity(capacity)),
            ready: Condvar::new(),
            capacity,
            running: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        });
        for n in 0..threads {
            let shared = shared.clone();
            // A thread that cannot start leaves the others to do the work.
            let _ = std::thread::Builder::new()
                .name(format!("argon2-{n}"))
                .spawn(move || work(&shared));
        }
        Self { shared, threads }
    }

    /// The most hashes that ever ran at the same moment.
    pub fn peak_concurrency(&self) -> usize {
        self.shared.peak.load(Ordering::Relaxed)
    }

    /// How many threads hash at once.
    pub fn threads(&self) -> usize {
        self.threads
    }

    fn submit(&self, job: Job) -> Result<(), AuthError> {
        let mut jobs = self
            .shared
            .jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if jobs.len() >= self.shared.capacity {
            return Err(AuthError::Busy);
        }
        jobs.push_back(job);
        drop(jobs);
        self.shared.ready.notify_one();
        Ok(())
    }

    /// Hashes a new password with argon2id (default parameters, random salt).
    pub async fn hash(&self, password: String) -> Result<String, AuthError> {
        let (tx, rx) = oneshot::channel();
        self.submit(Job::Hash(password, tx))?;
        rx.await
            .map_err(|e| AuthError::Hashing(e.to_string()))?
            .map_err(AuthError::Hashing)
    }

    /// Verifies a password. With no stored hash it does the same work against
    /// a dummy hash, then answers false, so every attempt costs the same.
    pub async fn verify(
        &self,
        password: String,
        stored: Option<String>,
    ) -> Result<bool, AuthError> {
        let (tx, rx) = oneshot::channel();
        self.submit(Job::Verify(password, stored, tx))?;
        rx.await.map_err(|e| AuthError::Hashing(e.to_string()))
    }
}

/// A hashing thread: takes jobs, keeps its block while busy, frees it when idle.
fn work(shared: &Shared) {
    let mut memory: Vec<Block> = Vec::new();
    loop {
        let job = {
            let mut jobs = shared.jobs.lock().unwrap_or_else(PoisonError::into_inner);
            loop {
                if let Some(job) = jobs.pop_front() {
                    break Some(job);
                }
                let (guard, wait) = shared
                    .ready
                    .wait_timeout(jobs, HashPool::IDLE_RELEASE)
                    .unwrap_or_else(PoisonError::into_inner);
                jobs = guard;
                if wait.timed_out() && jobs.is_empty() {
                    break None;
                }
            }
        };
        let Some(job) = job else {
            memory = Vec::new();
            continue;
        };
        let running = shared.running.fetch_add(1, Ordering::SeqCst) + 1;
        shared.peak.fetch_max(running, Ordering::SeqCst);
        match job {
            Job::Hash(password, reply) => {
                let _ = reply.send(hash(&password, &mut memory));
            }
            Job::Verify(password, stored, reply) => {
                let real = stored.is_some();
                let hash = match stored.as_deref() {
                    Some(hash) => hash,
                    None => dummy_hash(&mut memory),
                };
                let ok = verify(&password, hash, &mut memory);
                let _ = reply.send(ok && real);
            }
        }
        shared.running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Blocks reserved (not touched) per thread: 33 MiB, above the 32 MiB that
/// glibc's malloc ever serves from its arenas, so the reservation is its own
/// mapping and freeing it gives the memory back to the system at once.
const RESERVED_BLOCKS: usize = 33 * 1024;

/// `memory` grown to what `params` need (reused between hashes).
fn blocks<'m>(memory: &'m mut Vec<Block>, params: &Params) -> &'m mut [Block] {
    let count = params.block_count();
    if memory.len() < count {
        memory.reserve_exact(RESERVED_BLOCKS.max(count) - memory.len());
        memory.resize(count, Block::default());
    }
    &mut memory[..count]
}

/// The PHC string of an argon2id hash of `password` under a random salt.
fn hash(password: &str, memory: &mut Vec<Block>) -> Result<String, String> {
    let params = Params::default();
    let mut salt = [0u8; Salt::RECOMMENDED_LENGTH];
    rand::rng().fill_bytes(&mut salt);
    let mut out = [0u8; Params::DEFAULT_OUTPUT_LEN];
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params.clone())
        .hash_password_into_with_memory(
            password.as_bytes(),
            &salt,
            &mut out,
            blocks(memory, &params),
        )
        .map_err(|e| e.to_string())?;
    let phc = PasswordHash {
        algorithm: Algorithm::Argon2id.ident(),
        version: Some(Version::V0x13.into()),
        params: ParamsString::try_from(&params).map_err(|e| e.to_string())?,
        salt: Some(Salt::new(&salt).map_err(|e| e.to_string())?),
        hash: Some(Output::new(&out).map_err(|e| e.to_string())?),
    };
    Ok(phc.to_string())
}

/// Whether `password` matches the PHC string `stored`; compared in constant time.
fn verify(password: &str, stored: &str, memory: &mut Vec<Block>) -> bool {
    let Ok(phc) = PasswordHash::new(stored) else {
        return false;
    };
    let (Some(salt), Some(expected)) = (&phc.salt, &phc.hash) else {
        return false;
    };
    let Ok(algorithm) = Algorithm::try_from(phc.algorithm.as_str()) else {
        return false;
    };
    let version = phc
        .version
        .and_then(|v| Version::try_from(v).ok())
        .unwrap_or_default();
    let Ok(params) = Params::try_from(&phc) else {
        return false;
    };
    let mut out = vec![0u8; expected.len()];
    Argon2::new(algorithm, version, params.clone())
        .hash_password_into_with_memory(
            password.as_bytes(),
            salt,
            &mut out,
            blocks(memory, &params),
        )
        .is_ok()
        && bool::from(out.ct_eq(expected.as_bytes()))
}

/// A hash of no one's password, verified against when an account has none;
/// made once, in the calling thread's own block.
fn dummy_hash(memory: &mut Vec<Block>) -> &'static str {
    static DUMMY: OnceLock<String> = OnceLock::new();
    DUMMY.get_or_init(|| {
        let mut password = [0u8; 32];
        rand::rng().fill_bytes(&mut password);
        hash(&String::from_utf8_lossy(&password), memory).unwrap_or_default()
    })
}

#[cfg(test)]
mod tests {
    use argon2::PasswordVerifier;

    use super::*;

    #[tokio::test]
    async fn hashes_verify_and_interoperate() {
        let pool = HashPool::new(1, 4);
        let hash = pool.hash("correct horse".into()).await.unwrap();
        assert!(
            hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
            "{hash}"
        );
        assert!(
            pool.verify("correct horse".into(), Some(hash.clone()))
                .await
                .unwrap()
        );
        assert!(
            !pool
                .verify("wrong".into(), Some(hash.clone()))
                .await
                .unwrap()
        );
        assert!(!pool.verify("anything".into(), None).await.unwrap());
        assert!(
            !pool
                .verify("x".into(), Some("garbage".into()))
                .await
                .unwrap()
        );
        // Hashes of the argon2 crate's own API (stored before this pool) still verify.
        assert!(
            Argon2::default()
                .verify_password(b"correct horse", hash.as_str())
                .is_ok()
        );
        let theirs = argon2::PasswordHasher::hash_password(&Argon2::default(), b"old one")
            .unwrap()
            .to_string();
        assert!(pool.verify("old one".into(), Some(theirs)).await.unwrap());
    }

    #[tokio::test]
    async fn a_full_queue_refuses_and_threads_are_bounded() {
        let pool = HashPool::new(2, 3);
        let attempts: Vec<_> = (0..12)
            .map(|_| {
                let pool = pool.clone();
                tokio::spawn(async move { pool.verify("pw".into(), None).await })
            })
            .collect();
        let mut busy = 0;
        for attempt in attempts {
            if matches!(attempt.await.unwrap(), Err(AuthError::Busy)) {
                busy += 1;
            }
        }
        assert!(busy > 0, "some attempts are refused past the queue");
        assert!(pool.peak_concurrency() <= 2, "{}", pool.peak_concurrency());
        assert!(pool.peak_concurrency() >= 1);
    }
}
