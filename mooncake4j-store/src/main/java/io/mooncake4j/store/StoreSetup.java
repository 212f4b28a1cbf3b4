package io.mooncake4j.store;

import io.mooncake4j.MooncakeConfigException;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.metadata.HttpMetadataStore;
import java.util.Locale;

/** Checks and names a client's setup derives from its configuration. */
final class StoreSetup {

    private StoreSetup() {}

    static boolean isHttp(String metadataServer) {
        return metadataServer.regionMatches(true, 0, "http://", 0, 7);
    }

    static void checkMetadataServer(StoreConfig config) {
        String m = config.metadataServer();
        if (TransferEngine.P2P_HANDSHAKE.equals(m)) {
            return;
        }
        if (!isHttp(m)) {
            throw configError(new MooncakeConfigException("metadata_server", String.format(Locale.ROOT,
                    "metadata_server '%s' is not supported: use P2PHANDSHAKE or http://host:port/metadata (etcd and"
                            + " redis stores are not implemented)", m)));
        }
        try {
            HttpMetadataStore.of(m).close();
        } catch (IllegalArgumentException e) {
            throw configError(new MooncakeConfigException("metadata_server", e.getMessage(), e));
        }
    }

    static StoreException configError(MooncakeConfigException e) {
        return new StoreException(ErrorCode.INVALID_PARAMS.code(), e.getMessage(), e);
    }

    static String hostOnly(String h) {
        int colon = h.lastIndexOf(':');
        return colon > 0 && h.indexOf(':') == colon ? h.substring(0, colon) : h;
    }

    static String hostId(StoreConfig config) {
        String h = hostOnly(config.localHostname());
        // Mooncake's ResolveMooncakeHostId: loopback names have no host id
        return h.equalsIgnoreCase("localhost") || h.equals("127.0.0.1") || h.equals("0.0.0.0") || h.equals("::1")
                || h.equals("[::1]") ? "" : h;
    }
}
