/**
 * Test support shipped in the main jar: {@link io.mooncake4j.engine.testing.ScriptedTransferEngine},
 * a recording engine with scripted return codes and optional in-JVM byte copies, for the unit
 * tests of this project and of embedders.
 */
package io.mooncake4j.engine.testing;
