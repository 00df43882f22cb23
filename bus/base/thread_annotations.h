#pragma once

// Clang's thread-safety analysis (-Wthread-safety), as LevelDB and Abseil
// use it: a member says which mutex guards it, a function which mutex it
// needs held or must not hold, and the compiler checks every access. Other
// compilers see nothing (the macros are empty), so the annotations cost
// nothing where they are not checked. CI builds the tree with clang-14 and
// -Wthread-safety -Werror (CEPBUS_THREAD_SAFETY=ON, cmake/Options.cmake).
//
//   Mutex mu_;
//   int64_t count_ GUARDED_BY(mu_);
//   void addLocked(int64_t n) REQUIRES(mu_);
//   void add(int64_t n) EXCLUDES(mu_) { MutexLock lock(mu_); addLocked(n); }

#if defined(__clang__)
#define CEPBUS_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define CEPBUS_THREAD_ANNOTATION(x)
#endif

// A type that is a lock (Mutex).
#define CAPABILITY(x) CEPBUS_THREAD_ANNOTATION(capability(x))
// An RAII type that holds a lock for its scope (MutexLock).
#define SCOPED_CAPABILITY CEPBUS_THREAD_ANNOTATION(scoped_lockable)
// The member is read and written only with the mutex held.
#define GUARDED_BY(x) CEPBUS_THREAD_ANNOTATION(guarded_by(x))
// What the pointer points to is read and written only with the mutex held.
#define PT_GUARDED_BY(x) CEPBUS_THREAD_ANNOTATION(pt_guarded_by(x))
// The caller holds the mutex(es).
#define REQUIRES(...) CEPBUS_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
// The caller does not hold the mutex(es): the function takes them itself.
#define EXCLUDES(...) CEPBUS_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// The function takes / releases the mutex(es) and returns with them held / free.
#define ACQUIRE(...) CEPBUS_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) CEPBUS_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) CEPBUS_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// As REQUIRES/ACQUIRE/RELEASE, for a shared (reader) hold of a SharedMutex.
#define REQUIRES_SHARED(...) CEPBUS_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) CEPBUS_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) CEPBUS_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
// The function checks (and aborts unless) the mutex is held.
#define ASSERT_CAPABILITY(x) CEPBUS_THREAD_ANNOTATION(assert_capability(x))
// The function returns a reference to the mutex.
#define RETURN_CAPABILITY(x) CEPBUS_THREAD_ANNOTATION(lock_returned(x))
// An escape hatch for code the analysis cannot follow; each use says why.
#define NO_THREAD_SAFETY_ANALYSIS CEPBUS_THREAD_ANNOTATION(no_thread_safety_analysis)
