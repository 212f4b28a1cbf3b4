package io.mooncake4j.store;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

/**
 * A second process for the store fault tests: a client that contributes a segment to the pool and
 * holds it until stdin says {@code quit} or closes. Arguments: the master's {@code host:port} and the
 * segment size in bytes. Prints {@code READY <segment name>} once mounted; the test kills it
 * (SIGKILL) to take the node owning a replica away mid-get.
 */
final class StoreHolderChild {

    private StoreHolderChild() {}

    public static void main(String[] args) throws Exception {
        StoreConfig cfg = StoreConfig.loopback(args[0]).withGlobalSegmentSize(Long.parseLong(args[1]))
                .withLocalBufferSize(0).withTimings(Duration.ofSeconds(3), Duration.ofMillis(300));
        try (MooncakeStoreClient c = MooncakeStoreClient.setup(cfg);
                BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            System.out.println("READY " + c.getHostname());
            System.out.flush();
            String line;
            while ((line = in.readLine()) != null && !line.equals("quit")) {
                // holds the segment; nothing else to do
            }
        }
    }
}
