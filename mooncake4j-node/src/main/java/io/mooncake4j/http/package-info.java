/**
 * The HTTP front door of the nodes ({@code serve}, {@code proxy}): {@link io.mooncake4j.http.HttpFront}
 * runs Jetty's HTTP/1.1 server (its strict parser, header-size limit and idle timeout) and hands each
 * request, as an {@link io.mooncake4j.http.Exchange}, to a blocking route table on a virtual thread of
 * its own; {@link io.mooncake4j.http.HttpLimits} are what a client may make a node spend: a header
 * deadline, a minimum body rate on a recent window and an overall body deadline (enforced by one
 * sweeper thread per front, which closes the connection), a connection cap, and the per-network
 * shares of the nodes' body-upload and in-flight slots ({@link io.mooncake4j.http.FairSlots}, which
 * evicts the slowest body rather than refuse a newcomer), so that the connections of one slow client,
 * from however many addresses of its network, cannot take what every other client needs.
 *
 * <p>A node's routes are registered in a {@link io.mooncake4j.http.Routes} table, its front's handler:
 * a route says whether it takes a body, and one that does is handed the body already read under a
 * body-upload slot, within its limit (413 beyond, before it is read when declared), and held to the
 * front's deadlines; the route calls nothing to get this. A route that reads no body cannot read one.
 *
 * <p>The library's bootstrap server is its own small HTTP/1.1 server with its own bounds (the library
 * carries no HTTP-server dependency); this package is the node artifact's.
 *
 * <p><b>Threads and ownership:</b> a front owns its Jetty server (one acceptor and one selector
 * thread, {@code <name>io-N}), the sweeper ({@code <name>-deadlines}) and the virtual threads of the
 * requests in flight ({@code <name>N}); an {@link io.mooncake4j.http.Exchange} is used by its request's
 * thread only; {@link io.mooncake4j.http.FairSlots} is thread-safe.
 */
package io.mooncake4j.http;
