#pragma once

// How Proton's proactor hands a ready connection to a container thread, for
// the whole process.
//
// By default Proton 0.37's epoll proactor schedules "warm": a connection that
// becomes ready goes back to the thread that ran it last, which is woken for
// it even when the thread that made it ready is free a moment later. On the
// bus nearly every message makes another connection ready (an event read on
// a publisher's connection goes out on a subscriber's; at-least-once, the
// subscriber's accept settles the publisher's delivery), so warm scheduling
// turns each of those hand-overs into a wake of a parked thread. Without it
// the first free thread takes the connection, often the one that made it
// ready, and a second thread is woken only when both have work.
//
// Measured with amqp_bench (two listener threads, 2-core machine, 8 rounds
// alternating with the default): at-least-once floods 111-130 k msg/s
// against 95-124 k, the at-least-once p99 at 10,000/s 202-323 us against
// 276-417 us; the other figures moved less than their noise. See
// docs/benchmarks.md.

namespace cepbus::services::amqp {

// Makes every Proton proactor the process creates from now on schedule ready
// connections on the first free container thread. Proton reads this setting
// (the environment variable PNI_EPOLL_NOWARM) when a proactor is created and
// has no API for it.
//
// Call it before the process starts any thread: it changes the environment,
// which another thread must not be reading at the time.
void scheduleReadyConnectionsOnAnyFreeThread();

}  // namespace cepbus::services::amqp
