/*
 * Spark's local-disk shuffle storage, plus one answer: that a lost executor's map outputs need not
 * be dropped by Spark (docs/decisions/0047-lost-executor-served-from-copies.md). Installed by
 * `sparkrecover submit` as spark.shuffle.sort.io.plugin.class on a cluster where map outputs are
 * copied to storage every executor reads; KeptServing, installed by KeepingPlugin's driver side,
 * then re-points each of the lost executor's outputs whose copy is durable and removes the rest.
 *
 * supportsReliableStorage() is true only once KeptServing is installed: without it Spark drops a
 * lost executor's outputs itself, as it does with its own storage plugin.
 */
package sparkrecover.jvm.shuffle;

import org.apache.spark.SparkConf;
import org.apache.spark.shuffle.api.ShuffleDriverComponents;
import org.apache.spark.shuffle.sort.io.LocalDiskShuffleDataIO;
import org.apache.spark.shuffle.sort.io.LocalDiskShuffleDriverComponents;

public class KeepingShuffleDataIO extends LocalDiskShuffleDataIO {
    /** Set by submit with this plugin: the driver serves a lost executor's kept map outputs. */
    public static final String SERVE = "spark.sparkrecover.shuffle.serve";

    public KeepingShuffleDataIO(SparkConf conf) {
        super(conf);
    }

    @Override
    public ShuffleDriverComponents driver() {
        return new LocalDiskShuffleDriverComponents() {
            @Override
            public boolean supportsReliableStorage() {
                return KeptServing.installed;
            }
        };
    }
}
