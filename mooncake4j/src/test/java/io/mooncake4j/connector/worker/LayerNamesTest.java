package io.mooncake4j.connector.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.ConnectorException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 10, unit = TimeUnit.SECONDS)
class LayerNamesTest {

    @Test
    void extractsTheFirstIntegerComponent() {
        assertEquals(12, LayerNames.extractLayerIndex("model.layers.12.self_attn"));
        assertEquals(0, LayerNames.extractLayerIndex("model.layers.0.self_attn.attn"));
        assertEquals(3, LayerNames.extractLayerIndex("layers.3"));
        assertEquals(7, LayerNames.extractLayerIndex("7"));
        assertEquals(12, LayerNames.extractLayerIndex("model.layers.12.mlp.experts.5"));
        assertEquals(31, LayerNames.extractLayerIndex("model.language_model.layers.31.attn.swa_cache"));
    }

    @Test
    void skipsComponentsThatMixLettersAndDigits() {
        assertEquals(4, LayerNames.extractLayerIndex("model.layer1a.4.attn"));
    }

    @Test
    void rejectsNamesWithoutAnIntegerComponent() {
        ConnectorException e = assertThrows(ConnectorException.class,
                () -> LayerNames.extractLayerIndex("model.decoder.attn"));
        assertTrue(e.getMessage().contains("'model.decoder.attn'"), e.getMessage());
        assertThrows(ConnectorException.class, () -> LayerNames.extractLayerIndex(""));
        assertThrows(ConnectorException.class, () -> LayerNames.extractLayerIndex("a..b."));
    }
}
