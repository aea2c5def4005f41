// Package clustertest runs opsq as a cluster of real "opsq serve" processes on one
// database and checks what matters to a user of it: every chunk completed exactly once,
// with the output of a token that was actually delivered, and how many chunks were handed
// out twice. It is the kit of the multi-instance tests of cmd/opsq and of the benchmark.
//
// It has four parts:
//
//   - the process harness: [Binary], [HoldPort] and [Start] give a [Process] (one child
//     on a port nobody else can take) that can be signalled (SIGKILL, SIGSTOP/SIGCONT,
//     SIGTERM); [Cluster] starts several on one database with the fast timings of the
//     tests ([RenewInterval] and the others) and reports to a testing.TB;
//   - the claims readers: [ReadClaims], [Cluster.ClaimsOf], [Cluster.WatchTakeover],
//     [TokenClaim];
//   - the [Ledger], which records every delivery and completion answer and compares them
//     with the database at the end ([Ledger.Verify], [Ledger.Check]);
//   - the load generator: [RunConsumers], [RunProducer], [SubmitChunks], [ReserveHeld].
//
// Everything but [Cluster] and the helpers that take a testing.TB works outside tests.
package clustertest
