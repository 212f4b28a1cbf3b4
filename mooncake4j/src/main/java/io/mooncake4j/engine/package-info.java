/**
 * The Mooncake Transfer Engine API ({@link io.mooncake4j.engine.TransferEngine}) with
 * Mooncake's return codes ({@link io.mooncake4j.engine.ErrorCodes},
 * {@link io.mooncake4j.engine.StatusCodes}) and the registration rules shared by every transport
 * ({@link io.mooncake4j.engine.BufferRegistry}). What an engine refused or rerouted on its own is
 * readable through {@link io.mooncake4j.engine.TransferEngine#counters()}
 * ({@link io.mooncake4j.engine.EngineCounters}).
 *
 * <p>Engines are thread-safe. Control-path failures throw
 * {@link io.mooncake4j.engine.TransferEngineException}; the data path returns codes.
 */
package io.mooncake4j.engine;
