package io.mooncake4j.connector.worker.send;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.reflect.Modifier;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The send path is composition: each of its classes owns its state and is handed its collaborators,
 * none extends another class of the send path and none is an abstract base that parts fill in. Read from
 * the compiled classes of the package, so a class added later is held to it too.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class SendPathOwnershipTest {

    @Test
    void noClassOfTheSendPathExtendsAnotherOrIsAnAbstractBase() throws IOException, URISyntaxException,
            ClassNotFoundException {
        Path dir = Path.of(KvSender.class.getProtectionDomain().getCodeSource().getLocation().toURI())
                .resolve(KvSender.class.getPackageName().replace('.', '/'));
        List<Class<?>> classes = new ArrayList<>();
        try (Stream<Path> files = Files.list(dir)) {
            for (Path f : files.filter(p -> p.toString().endsWith(".class")).toList()) {
                String name = f.getFileName().toString().replaceAll("\\.class$", "");
                if (!name.equals("package-info")) {
                    classes.add(Class.forName(KvSender.class.getPackageName() + "." + name, false,
                            KvSender.class.getClassLoader()));
                }
            }
        }
        assertTrue(classes.size() > 20, "the send package's classes were read: " + classes);
        List<String> wrong = new ArrayList<>();
        for (Class<?> c : classes) {
            Class<?> sup = c.getSuperclass();
            if (sup != null && sup.getPackageName().equals(c.getPackageName()) && !c.isAnonymousClass()) {
                wrong.add(c.getName() + " extends " + sup.getName());
            }
            if (!c.isInterface() && Modifier.isAbstract(c.getModifiers())) {
                wrong.add(c.getName() + " is abstract");
            }
        }
        assertEquals(List.of(), wrong, "the send path's parts are composed, not subclassed");
        assertTrue(classes.contains(PendingSends.class) && classes.contains(Waves.class)
                && classes.contains(LayerwisePush.class), "the parts are in the package: " + classes);
    }
}
