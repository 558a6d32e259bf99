//! The one policy for poisoned locks: take the data as it is.
//!
//! Every `std::sync` lock in the services guards a critical section that is
//! one insert, remove or replace (a routing table, a map of sessions, a
//! current catalog), never held across an `.await` nor across a step that
//! could leave the data half-written. A panic inside one therefore leaves
//! the data whole, and refusing every later access would turn one bug into
//! an outage. So a poisoned lock is recovered here, in one place, instead
//! of `expect` at some sites and recovery at others.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Lock `mutex`, taking its data as it is when a holder panicked.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Read `lock`, taking its data as it is when a writer panicked.
pub fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Write `lock`, taking its data as it is when a holder panicked.
pub fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_poisoned_by_a_panicking_holder_still_gives_its_data() {
        let shared = std::sync::Arc::new(Mutex::new(vec![1]));
        let held = shared.clone();
        let _ = std::thread::spawn(move || {
            let _guard = held.lock().unwrap();
            panic!("a holder panics");
        })
        .join();
        assert!(shared.is_poisoned());
        lock(&shared).push(2);
        assert_eq!(*lock(&shared), [1, 2]);
    }
}
