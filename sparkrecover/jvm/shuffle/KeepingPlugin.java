/*
 * How the driver learns that a map output was kept
 * (docs/decisions/0026-kept-map-outputs-on-any-filesystem.md): the executor that kept it says so
 * through Spark's plugin API (spark.plugins), once its files are durable; the driver's side turns
 * the message into a journal line. On a cluster the driver cannot see an executor's files, and
 * looking at shared storage would cost a listing per map task and lag behind; a message costs one
 * RPC per kept map output.
 *
 * Messages are tab-separated strings (a class of this jar would need the driver's class loader to
 * deserialize): "kept", then the fields of KeptCopies.commit; or "failed" and why.
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

    private static volatile PluginContext executorContext;
    private static volatile boolean failureTold;

    @Override
    public DriverPlugin driverPlugin() {
        return new DriverPlugin() {
            @Override
            public Map<String, String> init(SparkContext context, PluginContext plugin) {
                KeptStore.openAhead(context.conf().get(KeepingShuffleManager.DIR, ""), context.conf());
                return Collections.emptyMap();
            }

            @Override
            public Object receive(Object message) {
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

    /** The first failure of this executor, for the journal; the rest only in its log. */
    static void tellDriverOnce(String message) {
        if (!failureTold) {
            failureTold = true;
            tellDriver(message);
        }
    }
}
