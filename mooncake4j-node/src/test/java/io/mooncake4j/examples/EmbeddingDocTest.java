package io.mooncake4j.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * docs/embedding.md includes the example files verbatim: after each
 * {@code <!-- example: PATH -->} marker comes a {@code java} block equal to the file at PATH.
 * {@code -Dmooncake4j.docs.update=true} rewrites the blocks from the files instead of failing.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class EmbeddingDocTest {

    private static final Path DOC = Path.of("../docs/embedding.md");
    private static final Path EXAMPLES = Path.of("src/test/java/io/mooncake4j/examples");
    private static final Pattern BLOCK = Pattern.compile(
            "<!-- example: (\\S+) -->\\n\\n```java\\n(.*?)```", Pattern.DOTALL);

    @Test
    void everyCodeBlockEqualsItsExampleFile() throws IOException {
        String doc = Files.readString(DOC, StandardCharsets.UTF_8);
        Matcher m = BLOCK.matcher(doc);
        StringBuilder updated = new StringBuilder();
        List<String> stale = new ArrayList<>();
        int blocks = 0;
        while (m.find()) {
            blocks++;
            String file = Files.readString(Path.of(m.group(1)), StandardCharsets.UTF_8);
            if (!file.equals(m.group(2))) {
                stale.add(m.group(1));
            }
            m.appendReplacement(updated, Matcher.quoteReplacement(
                    "<!-- example: " + m.group(1) + " -->\n\n```java\n" + file + "```"));
        }
        m.appendTail(updated);
        assertTrue(blocks > 0, "no example block found in " + DOC);
        if (!stale.isEmpty()) {
            if (Boolean.getBoolean("mooncake4j.docs.update")) {
                Files.writeString(DOC, updated.toString(), StandardCharsets.UTF_8);
            } else {
                fail(DOC + ": the code blocks of " + stale + " differ from the files; copy the files into the "
                        + "blocks, or run this test with -Dmooncake4j.docs.update=true");
            }
        }
    }

    @Test
    void everyExampleFileIsInTheDoc() throws IOException {
        String doc = Files.readString(DOC, StandardCharsets.UTF_8);
        Set<String> included = new TreeSet<>();
        Matcher m = BLOCK.matcher(doc);
        while (m.find()) {
            included.add(m.group(1));
        }
        Set<String> files = new TreeSet<>();
        try (Stream<Path> s = Files.list(EXAMPLES)) {
            s.map(p -> EXAMPLES.resolve(p.getFileName()).toString().replace('\\', '/'))
                    .filter(p -> p.endsWith(".java") && !p.endsWith("DocTest.java"))
                    .forEach(files::add);
        }
        assertEquals(files, included, "example files and the blocks of " + DOC);
    }

    @Test
    void noBlockIsOrphaned() throws IOException {
        String doc = Files.readString(DOC, StandardCharsets.UTF_8);
        long javaBlocks = doc.lines().filter(l -> l.equals("```java")).count();
        // example blocks are files here; `file:` blocks (the fresh project's module-info) are
        // compiled by scripts/embedding-check.sh
        long markers = doc.lines().filter(l -> l.startsWith("<!-- example: ")
                || l.startsWith("<!-- file: ") && l.endsWith(".java -->")).count();
        assertEquals(markers, javaBlocks, "every java block of " + DOC + " is an example file or a checked file");
    }
}
