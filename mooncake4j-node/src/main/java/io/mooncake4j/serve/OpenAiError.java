package io.mooncake4j.serve;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A request the node answers with an OpenAI-style error body, as vLLM's server does:
 * {@code {"error":{"message":..., "type":..., "param":..., "code":<status>}}}.
 */
public final class OpenAiError extends RuntimeException {

    private static final long serialVersionUID = 1L;

    private final int status;
    private final String type;
    private final String param;

    /**
     * @param status the HTTP status (also the body's {@code code})
     * @param type   vLLM's error type: {@code BadRequestError}, {@code NotFoundError}, ...
     * @param param  the request field at fault, or null
     */
    public OpenAiError(int status, String type, String param, String message) {
        super(message);
        this.status = status;
        this.type = type;
        this.param = param;
    }

    /** 400 {@code BadRequestError}. */
    public static OpenAiError badRequest(String param, String message) {
        return new OpenAiError(400, "BadRequestError", param, message);
    }

    /** The HTTP status. */
    public int status() {
        return status;
    }

    /** The error body. */
    public Map<String, Object> body() {
        return body(status, type, param, getMessage());
    }

    /** An error body. */
    public static Map<String, Object> body(int status, String type, String param, String message) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("message", message);
        e.put("type", type);
        e.put("param", param);
        e.put("code", status);
        Map<String, Object> root = new LinkedHashMap<>();
        root.put("error", e);
        return root;
    }
}
