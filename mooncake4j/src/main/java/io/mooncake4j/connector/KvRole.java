package io.mooncake4j.connector;

import io.mooncake4j.MooncakeConfigException;

/** vLLM's {@code kv_transfer_config.kv_role}. */
public enum KvRole {
    /** Prefill node P: sends KV. */
    KV_PRODUCER("kv_producer"),
    /** Decode node D: receives KV. */
    KV_CONSUMER("kv_consumer"),
    /** Both code paths active. */
    KV_BOTH("kv_both");

    private final String wireName;

    KvRole(String wireName) {
        this.wireName = wireName;
    }

    /** {@return the value as written in {@code kv_transfer_config}} */
    public String wireName() {
        return wireName;
    }

    /** {@return vLLM's {@code is_kv_producer}: true only for {@code kv_producer}} */
    public boolean isProducer() {
        return this == KV_PRODUCER;
    }

    /** {@return vLLM's {@code is_kv_consumer}: true only for {@code kv_consumer}} */
    public boolean isConsumer() {
        return this == KV_CONSUMER;
    }

    /**
     * The role whose wire name is {@code value} ({@code kv_producer}, {@code kv_consumer}, {@code kv_both}).
     *
     * @param value the name as in {@code kv_transfer_config}
     * @return the role
     * @throws io.mooncake4j.MooncakeConfigException when no role has that name
     */
    public static KvRole parse(String value) {
        for (KvRole r : values()) {
            if (r.wireName.equals(value)) {
                return r;
            }
        }
        throw new MooncakeConfigException("kv_role", "kv_role must be one of kv_producer, kv_consumer, kv_both; got '"
                + value + "'");
    }
}
