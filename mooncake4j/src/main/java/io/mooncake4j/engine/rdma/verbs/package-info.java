/**
 * FFM bindings to libibverbs ({@code libibverbs.so.1}, rdma-core): device list, device context,
 * protection domain, memory regions, completion queues and RC queue pairs. No JNI, no C shim.
 *
 * <p>Not exported: only the RDMA transport ({@code io.mooncake4j.engine.rdma}) uses these types.
 * The raw layer ({@code VerbsLayouts}, {@code Verbs}) is package-private; the owning wrappers
 * ({@link io.mooncake4j.engine.rdma.verbs.IbvContext} and its children) are public within the
 * module.
 *
 * <p><b>ABI.</b> Struct layouts are hand-written mirrors of rdma-core's {@code verbs.h}, checked
 * against {@code native/verbs_layout.c} by the test build; a mismatch fails the build and is never
 * patched at run time. {@code ibv_post_send} and {@code ibv_poll_cq} are {@code static inline}
 * in {@code verbs.h}; they are called through the function pointers in {@code ibv_context.ops}.
 *
 * <p><b>Errors.</b> Calls that return a pointer capture {@code errno} (per thread, in a
 * call-local capture segment); calls documented as returning an errno value use that value.
 * Control-path failures throw {@link io.mooncake4j.engine.rdma.verbs.VerbsException}; the data
 * path ({@code postSend}, {@code poll}) returns the verbs return code.
 *
 * <p><b>Ownership and threads.</b> {@link io.mooncake4j.engine.rdma.verbs.IbvContext} owns
 * everything created from it and closes it in the order QPs, CQs, MRs, PDs, context, after
 * moving QPs to ERR and draining the CQs. Control-path methods are thread-safe (they
 * synchronise on the context); a QP is posted to by one owner thread and a CQ polled by one
 * owner thread, as libibverbs providers expect. Closing is idempotent.
 */
package io.mooncake4j.engine.rdma.verbs;
