/*
 * How the driver learns that a map output was kept
 * (docs/decisions/0026-kept-map-outputs-on-any-filesystem.md): the executor that kept it says so
 * through Spark's plugin API (spark.plugins), once its files are durable; the driver's side turns
 * the message into a journal line. On a cluster the driver cannot see an executor's files, and
 * looking at shared storage would cost a listing per map task and lag behind; a message costs one
 * RPC per kept map output.
 *
 * Messages are tab-separated strings (a class of this jar would need the driver's class loader to
 * deserialize): "kept", then the fields of KeptCopies.commit; or "failed" and why. One question:
 * "folder", a shuffle id and a map index, which the driver answers with the folder of the copy it
 * serves for a lost executor's map output (KeptServing), or "" (none).
 */
package sparkrecover.jvm.shuffle;

import java.util.Collections;
import java.util.Map;

import org.apache.spark.SparkContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;

public class KeepingPlugin implements SparkPlugin {
    static final String KEPT = "kept";
    static final String FAILED = "failed";
    static final String FOLDER = "folder";

    private static volatile PluginContext executorContext;
    private static volatile boolean failureTold;

    @Override
    public DriverPlugin driverPlugin() {
        return new DriverPlugin() {
            @Override
            public Map<String, String> init(SparkContext context, PluginContext plugin) {
                KeptStore.openAhead(context.conf().get(KeepingShuffleManager.DIR, ""), context.conf());
                KeptServing.install(context);
                return Collections.emptyMap();
            }

            @Override
            public Object receive(Object message) {
                if (message instanceof String && ((String) message).startsWith(FOLDER + "\t")) {
                    String[] fields = ((String) message).split("\t");
                    String folder = fields.length != 3 ? null
                        : KeptServing.folder(Integer.parseInt(fields[1]), Integer.parseInt(fields[2]));
                    return folder == null ? "" : folder;
                }
                if (message instanceof String) {
                    KeepingShuffleManager.received((String) message);
                }
                return null;
            }
        };
    }

    @Override
    public ExecutorPlugin executorPlugin() {
        return new ExecutorPlugin() {
            @Override
            public void init(PluginContext context, Map<String, String> extraConf) {
                executorContext = context;
                KeptStore.openAhead(context.conf().get(KeepingShuffleManager.DIR, ""), context.conf());
            }

            @Override
            public void shutdown() {
                KeptCopies.shutdown();
                executorContext = null;
            }
        };
    }

    /** Executor side: hands a message to the driver (in local mode, the same JVM's driver). */
    static void tellDriver(String message) {
        PluginContext context = executorContext;
        if (context == null) {
            if (!KeepingShuffleManager.received(message)) {
                KeepingShuffleManager.warnOnce("kept map outputs cannot be reported to the driver: "
                                               + "spark.plugins does not list " + KeepingPlugin.class.getName());
            }
            return;
        }
        try {
            context.send(message);
        } catch (java.io.IOException | RuntimeException error) {
            KeepingShuffleManager.warnOnce("a kept map output could not be reported to the driver: " + error);
        }
    }

    /** Executor side: the folder of the copy the driver serves for a map output, or null. */
    static String askFolder(int shuffleId, int mapIndex) {
        PluginContext context = executorContext;
        if (context == null) {
            return KeptServing.folder(shuffleId, mapIndex);  // local mode: the driver is this JVM
        }
        try {
            Object answer = context.ask(FOLDER + "\t" + shuffleId + "\t" + mapIndex);
            return answer instanceof String && !((String) answer).isEmpty() ? (String) answer : null;
        } catch (Exception error) {
            KeepingShuffleManager.warnOnce("the driver could not say where a served map output is: " + error);
            return null;
        }
    }

    /** The first failure of this executor, for the journal; the rest only in its log. */
    static void tellDriverOnce(String message) {
        if (!failureTold) {
            failureTold = true;
            tellDriver(message);
        }
    }
}
