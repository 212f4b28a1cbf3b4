/**
 * The disaggregated-serving router of {@code bin/mooncake4j proxy}: vLLM's example Mooncake proxy
 * contract (XpYd round robin, one {@code transfer_id} per request, P and D called concurrently, D's answer
 * streamed through) with clear errors when a node fails.
 *
 * <ul>
 *   <li>{@link io.mooncake4j.proxy.ProxyConfig}: the nodes and bounds, validated once;</li>
 *   <li>{@link io.mooncake4j.proxy.DisaggProxy}: the HTTP server (an {@link io.mooncake4j.http.HttpFront}:
 *       Jetty, a virtual thread per request, the slow-client deadlines and per-address shares)
 *       and the client side ({@link io.mooncake4j.proxy.Http1Client}) with the readiness prober; what it writes
 *       to its client (OpenAI-style errors, D's answer copied or streamed) is in {@code ClientAnswers}, and
 *       the bounded reads, deadlines and failure classification of its calls to nodes in {@code NodeCalls};</li>
 *   <li>{@link io.mooncake4j.proxy.Http1Client}: a small blocking HTTP/1.1 client (keep-alive pool per
 *       upstream, bounded header, line and chunk-size lengths) for the proxy's calls to P and D and for the
 *       workload client, in place of the JDK's asynchronous {@code HttpClient} and its CPU per call; one
 *       pooled connection and its line reader are an {@code Http1Conn};</li>
 *   <li>{@link io.mooncake4j.proxy.WorkloadClient}: a load generator that sends a mixed workload through a
 *       proxy and checks every completion against a {@code kv_both} reference node (a {@code main} for
 *       {@code scripts/multihost.sh}, a class for {@code bin/mooncake4j demo --processes}).</li>
 * </ul>
 *
 * <p><b>Threads and ownership:</b> a {@code DisaggProxy} owns its server, client and prober thread and
 * closes them in {@link io.mooncake4j.proxy.DisaggProxy#close()}; it is safe to call from any thread.
 * Node state (up/down, engine ids) is published through volatile fields.
 */
package io.mooncake4j.proxy;
