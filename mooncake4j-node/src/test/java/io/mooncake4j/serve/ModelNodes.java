package io.mooncake4j.serve;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.engine.TransferEngines;
import io.mooncake4j.internal.json.Json;
import io.mooncake4j.model.JlamaModel;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;

/** What the model-node tests share: a {@code serve --model DIR} node on loopback TCP, and a JSON POST to it. */
final class ModelNodes {

    private ModelNodes() {
    }

    /**
     * Starts a node of {@code role} serving the F32 checkpoint in {@code model} as {@code servedName}: TP 1,
     * two workers, blocks of 16 tokens, a bootstrap server on an OS-assigned port; the caller closes it.
     */
    static ServeNode start(KvRole role, Path model, String servedName, String engineIdPrefix) {
        JlamaModel m = JlamaModel.load(model, "F32");
        MooncakeConnectorConfig cfg = MooncakeConnectorConfig.builder().kvRole(role)
                .engineId(engineIdPrefix + "-" + role.wireName() + "-" + System.nanoTime()).protocol("tcp")
                .numWorkers(2).hostname("127.0.0.1").bootstrapPort(0).abortRequestTimeout(Duration.ofSeconds(60))
                .tp(0, 1).build();
        ServeOptions o = new ServeOptions(m.kvShape(16), servedName, "127.0.0.1", 0, cfg, 64, "cpu", 0, "tcp", 512,
                16, 8192, 64, Duration.ofSeconds(10));
        return ServeNode.startWithModel(o, m, c -> TransferEngines.create("tcp"));
    }

    /** POSTs {@code body} as JSON to {@code path} of {@code n}, with a 60 s deadline. */
    static HttpResponse<String> post(HttpClient http, ServeNode n, String path, Map<String, Object> body)
            throws IOException, InterruptedException {
        return http.send(HttpRequest.newBuilder(URI.create(n.url() + path)).timeout(Duration.ofSeconds(60))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(Json.write(body)))
                .build(), HttpResponse.BodyHandlers.ofString());
    }
}
