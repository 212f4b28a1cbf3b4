/** {@code bin/mooncake4j} commands. Not part of the library API. */
package io.mooncake4j.cli;
