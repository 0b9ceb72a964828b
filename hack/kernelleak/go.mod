// Module kernelleak is the kernel-level leak experiment `make kernel-leak`
// runs (docs/leak.md): the memory cgroups, percpu and slab memory that
// sandbox-pod churn leaves behind with a tmpfs or a disk-backed uv cache,
// in a QEMU guest per kernel and on the machine's own kernel. The standard
// library only; apart from the main module, which it does not import.
module github.com/sandbox-webhook/sandbox-webhook/hack/kernelleak

go 1.26.0
