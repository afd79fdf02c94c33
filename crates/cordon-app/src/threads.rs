//! Threads kept for the next job once theirs is done.
//!
//! `exec` and `mcp` give each command a thread of its own and each of its outputs another.
//! A thread made and ended for every command cost more than its work: `clone3`, a stack
//! mapped, and at its end the stack handed back (`madvise`), which on a machine with more than
//! one CPU flushes every other CPU's view of the process's memory, by interrupt. So a thread
//! whose job is done waits [`KEPT_FOR`] for another before it ends.
//!
//! Nothing a job leaves on its thread reaches the next: cordon keeps no thread-local state,
//! and a job that panics is caught at the thread's top, as an ended thread's would be.

use std::panic::AssertUnwindSafe;
use std::sync::mpsc::{RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// How long a thread without a job waits for one before it ends.
pub const KEPT_FOR: Duration = Duration::from_secs(10);

/// At most this many threads wait for a job; one more ends at once.
const MOST_KEPT: usize = 64;

type Job = Box<dyn FnOnce() + Send>;

/// A waiting thread: its number, and where its next job goes.
type Waiting = (u64, Sender<Job>);

fn waiting() -> MutexGuard<'static, Vec<Waiting>> {
    static WAITING: Mutex<Vec<Waiting>> = Mutex::new(Vec::new());
    WAITING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether a job is done, and the signal that it became so.
type State = Arc<(Mutex<bool>, Condvar)>;

/// A job given to [`spawn`]: whether it is done, and waiting until it is.
#[derive(Debug)]
pub struct Handle(State);

impl Handle {
    pub fn is_finished(&self) -> bool {
        *self.0.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Returns once the job has returned or panicked.
    pub fn join(self) {
        let (done, changed) = &*self.0;
        let mut done = done.lock().unwrap_or_else(PoisonError::into_inner);
        while !*done {
            done = changed.wait(done).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Says a job is done when dropped, so also when the job panics.
struct Done(State);

impl Drop for Done {
    fn drop(&mut self) {
        *self.0.0.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.0.1.notify_all();
    }
}

/// Runs `job` on a thread waiting for one, or on a new thread when none is.
///
/// # Panics
/// When no thread can be made, as `std::thread::spawn` does.
pub fn spawn(job: impl FnOnce() + Send + 'static) -> Handle {
    let state: State = Arc::default();
    let done = Done(Arc::clone(&state));
    let mut job: Job = Box::new(move || {
        let _done = done;
        job()
    });
    loop {
        let Some((_, to)) = waiting().pop() else {
            std::thread::spawn(move || keep_working(job));
            break;
        };
        match to.send(job) {
            Ok(()) => break,
            // It ended between being listed and taken: the next one, then.
            Err(back) => job = back.0,
        }
    }
    Handle(state)
}

/// A kept thread's life: its first job, then each one it is given, until none came for
/// [`KEPT_FOR`] or enough others are waiting.
fn keep_working(first: Job) {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let me = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (to_me, jobs) = channel::<Job>();
    let mut job = first;
    loop {
        // A panic was already told by the panic hook; the job's `Done` has said it ended.
        let _ = std::panic::catch_unwind(AssertUnwindSafe(job));
        {
            let mut list = waiting();
            if list.len() >= MOST_KEPT {
                return;
            }
            list.push((me, to_me.clone()));
        }
        job = match jobs.recv_timeout(KEPT_FOR) {
            Ok(next) => next,
            Err(RecvTimeoutError::Timeout) => {
                let mut list = waiting();
                match list.iter().position(|(n, _)| *n == me) {
                    Some(at) => {
                        list.remove(at);
                        return;
                    }
                    // Taken after the wait ran out: its job is on the way.
                    None => {
                        drop(list);
                        match jobs.recv() {
                            Ok(next) => next,
                            Err(_) => return,
                        }
                    }
                }
            }
            Err(RecvTimeoutError::Disconnected) => return,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The thread a job ran on.
    fn thread_of_a_job() -> std::thread::ThreadId {
        let (tx, rx) = channel();
        spawn(move || tx.send(std::thread::current().id()).expect("send")).join();
        rx.recv().expect("the job ran")
    }

    #[test]
    fn a_done_thread_takes_the_next_job() {
        // Other tests run side by side and take waiting threads too, so which thread a job
        // gets is not known; but of many jobs one after another some must run on a thread
        // that ran one before, where a thread per job would give each a new one.
        let jobs = 100;
        let threads: std::collections::HashSet<_> = (0..jobs).map(|_| thread_of_a_job()).collect();
        assert!(
            threads.len() < jobs,
            "{jobs} jobs one after another ran on {} threads",
            threads.len()
        );
    }

    #[test]
    fn every_job_runs_once_and_join_waits_for_it() {
        let ran = Arc::new(AtomicUsize::new(0));
        let handles: Vec<Handle> = (0..200)
            .map(|_| {
                let ran = Arc::clone(&ran);
                spawn(move || {
                    std::thread::sleep(Duration::from_millis(1));
                    ran.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        for h in handles {
            h.join();
        }
        assert_eq!(ran.load(Ordering::SeqCst), 200);
    }

    #[test]
    fn a_job_that_panics_is_finished_and_its_thread_goes_on() {
        let h = spawn(|| panic!("on purpose, in a test"));
        h.join();
        let (tx, rx) = channel();
        let h = spawn(move || tx.send(7).expect("send"));
        h.join();
        assert_eq!(rx.recv().expect("the next job ran"), 7);
    }

    #[test]
    fn is_finished_tells_a_running_job_from_a_done_one() {
        let (go, wait) = channel::<()>();
        let h = spawn(move || {
            let _ = wait.recv();
        });
        assert!(!h.is_finished());
        go.send(()).expect("send");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !h.is_finished() {
            assert!(std::time::Instant::now() < deadline, "never finished");
            std::thread::sleep(Duration::from_millis(1));
        }
        h.join();
    }
}
