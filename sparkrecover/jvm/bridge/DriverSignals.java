/*
 * A driver stopped by a signal keeps what it finished
 * (docs/decisions/0036-driver-stopped-by-a-signal.md).
 *
 * Clusters stop drivers with SIGTERM (an eviction, a preemption, an orchestrator's timeout), people
 * with Ctrl-C (SIGINT). Either way Spark aborts the write that runs, and FileOutputCommitter's job
 * abort deletes <out>/_temporary with every committed task folder in it: the partitions a SIGKILL
 * would have left for a resume to keep. This class tells an abort that comes from the driver being
 * stopped from one that comes from the job failing, and lets the Python driver wind down first:
 *
 * interruption(): why the driver is being stopped, or null when it is not. Three signs, any one
 *   enough: the Python driver said so (interrupted(), from its signal handler, before it cancels its
 *   jobs); the JVM is shutting down (its own SIGTERM or SIGINT handling, System.exit); the Python
 *   driver's process is gone (killed alone: PythonRunner then shuts the Py4J gateway down, which
 *   interrupts the thread that waits for the write's job). FencedCommitProtocol.abortJob then keeps
 *   committed task output.
 *
 * install(pid): a SIGTERM or SIGINT that reaches only this JVM (spark-submit is what a launcher
 *   signals: sparkrecover submit forwards to it, Kubernetes' init process and Airflow signal it) is
 *   handed to the Python driver, which cancels its jobs, journals that it was interrupted, drains the
 *   listener (this JVM must still be up for that) and exits 128+N; PythonRunner then ends the JVM
 *   with that code. The JVM's own handling (shutdown hooks, exit 128+N) runs after GRACE_MS if the
 *   driver has not ended by then, at once on a second signal, and at once when the signal cannot be
 *   handed on. The same signal again within SAME_STOP_MS is the first one delivered twice (a Ctrl-C
 *   reaches the JVM from the terminal and from sparkrecover submit), not a second. Installed by the
 *   bootstrap once its SparkContext exists (driver/process/signals.py); a signal before that finds no write
 *   to keep.
 *
 * sun.misc.Signal is reached by reflection: javac --release 8 does not expose it, and it is the API
 * Spark's own SignalUtils uses; when it is missing, install says why and nothing changes.
 */
package sparkrecover.jvm.bridge;

import java.io.File;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

public final class DriverSignals {
    /** How long the Python driver has to wind down after a signal reached only the JVM. */
    public static final long GRACE_MS = 10_000;

    /**
     * A repeat of the signal last received within this long is the same stop delivered twice, not a
     * second one: a terminal's Ctrl-C reaches the whole foreground process group (spark-submit's JVM
     * and the Python driver) and sparkrecover submit, which forwards it to the JVM again a moment
     * later. Counted as a second stop it ended the JVM under the driver before it journaled.
     */
    public static final long SAME_STOP_MS = 1_000;

    private static final String[] SIGNALS = {"TERM", "INT"};

    private static volatile String interruption;
    private static volatile long driverPid = -1;
    private static volatile boolean installed;
    // Stops this JVM received itself: the first is handed to the driver, a second is not.
    private static int received;
    private static String lastName;
    private static long lastAtMs;

    private DriverSignals() {
    }

    /** The Python driver is being stopped by {@code why} ("SIGTERM", "SIGINT"): the first word stays. */
    public static synchronized void interrupted(String why) {
        if (interruption == null && why != null) {
            interruption = why;
        }
    }

    /** Why the driver is being stopped (an abort now keeps committed task output), or null. */
    public static String interruption() {
        String said = interruption;
        if (said != null) {
            return said;
        }
        if (shuttingDown()) {
            return "the JVM is shutting down";
        }
        long pid = driverPid;
        if (pid > 0 && !alive(pid)) {
            return "the Python driver (pid " + pid + ") is gone";
        }
        return null;
    }

    /** Forget the driver and its interruption (a test reuses one JVM for many drivers). */
    public static synchronized void reset() {
        interruption = null;
        driverPid = -1;
        received = 0;
        lastName = null;
    }

    /** Watch the Python driver {@code pid}: once it is gone, an abort keeps committed task output. */
    public static void watch(long pid) {
        driverPid = pid;
    }

    /**
     * Watch the Python driver {@code pid} and hand it the JVM's SIGTERM and SIGINT. Returns null when
     * the signals are handed on, else why not (the driver is still watched).
     */
    public static synchronized String install(long pid) {
        watch(pid);
        if (installed) {
            return null;
        }
        installed = true;  // once, even half-way: a second handler in front of ours would forward twice
        try {
            Class<?> signalClass = Class.forName("sun.misc.Signal");
            Class<?> handlerClass = Class.forName("sun.misc.SignalHandler");
            Method register = signalClass.getMethod("handle", signalClass, handlerClass);
            for (String name : SIGNALS) {
                Object signal = signalClass.getConstructor(String.class).newInstance(name);
                Forwarder forwarder = new Forwarder(name, signal, handlerClass.getMethod("handle", signalClass),
                                                    handlerClass.getField("SIG_IGN").get(null));
                Object proxy = Proxy.newProxyInstance(DriverSignals.class.getClassLoader(),
                                                      new Class<?>[] {handlerClass}, forwarder);
                forwarder.previous = register.invoke(null, signal, proxy);
            }
        } catch (InvocationTargetException error) {  // a signal the JVM keeps for itself (-Xrs)
            return "the JVM's SIGTERM and SIGINT cannot be handled: " + error.getCause();
        } catch (ReflectiveOperationException | RuntimeException | LinkageError error) {
            return "sun.misc.Signal is not available (" + error + ")";
        }
        return null;
    }

    /** Whether the JVM is running its shutdown hooks (a hook can no longer be added then). */
    static boolean shuttingDown() {
        Thread probe = new Thread();
        try {
            Runtime.getRuntime().addShutdownHook(probe);
            Runtime.getRuntime().removeShutdownHook(probe);
            return false;
        } catch (IllegalStateException inShutdown) {
            return true;
        }
    }

    /** Whether process {@code pid} runs: ProcessHandle on Java 9+, /proc on Java 8 (Linux). */
    static boolean alive(long pid) {
        try {
            Class<?> handles = Class.forName("java.lang.ProcessHandle");
            Optional<?> handle = (Optional<?>) handles.getMethod("of", long.class).invoke(null, pid);
            return handle.isPresent() && (Boolean) handles.getMethod("isAlive").invoke(handle.get());
        } catch (ReflectiveOperationException | RuntimeException error) {
            File proc = new File("/proc");
            return !proc.isDirectory() || new File(proc, Long.toString(pid)).exists();
        }
    }

    /**
     * SIG{@code name} reached this JVM at {@code atMs} (milliseconds, any fixed origin): which stop
     * it is (1 for the first), or 0 when it repeats the signal last received within SAME_STOP_MS.
     * Public for the tests, which cannot send the shared test JVM real signals.
     */
    public static synchronized int receive(String name, long atMs) {
        interrupted("SIG" + name);
        boolean repeat = name.equals(lastName) && atMs - lastAtMs < SAME_STOP_MS;
        lastName = name;
        lastAtMs = atMs;
        return repeat ? 0 : ++received;
    }

    /** Sends SIG{@code name} to {@code pid}; whether it was delivered. */
    static boolean send(String name, long pid) {
        if (pid <= 0) {
            return false;
        }
        try {
            Process kill = new ProcessBuilder("kill", "-s", name, Long.toString(pid)).redirectErrorStream(true).start();
            kill.getOutputStream().close();
            return kill.waitFor(5, TimeUnit.SECONDS) && kill.exitValue() == 0;
        } catch (java.io.IOException | InterruptedException | RuntimeException error) {
            return false;
        }
    }

    /** The JVM's handler of one signal, in front of the one it had (Java's own: shutdown, exit 128+N). */
    private static final class Forwarder implements InvocationHandler {
        private final String name;
        private final Object signal;
        private final Method handle;
        private final Object ignored;
        volatile Object previous;

        Forwarder(String name, Object signal, Method handle, Object ignored) {
            this.name = name;
            this.signal = signal;
            this.handle = handle;
            this.ignored = ignored;
        }

        @Override
        public Object invoke(Object proxy, Method method, Object[] args) {
            switch (method.getName()) {
                case "handle":
                    onSignal();
                    return null;
                case "hashCode":
                    return System.identityHashCode(proxy);
                case "equals":
                    return proxy == args[0];
                default:
                    return "sparkrecover signal forwarder for SIG" + name;
            }
        }

        private void onSignal() {
            int stops = receive(name, TimeUnit.NANOSECONDS.toMillis(System.nanoTime()));
            if (stops == 0) {
                return;  // the stop under way, delivered a second time
            }
            if (stops > 1 || !send(name, driverPid)) {
                chain();
                return;
            }
            System.err.println("sparkrecover: SIG" + name + " handed to the Python driver (pid " + driverPid
                               + "), which stops its jobs and journals what it finished; the JVM ends with it, "
                               + "or in " + (GRACE_MS / 1000) + " s, or at a second signal");
            Thread grace = new Thread(() -> {
                try {
                    Thread.sleep(GRACE_MS);
                } catch (InterruptedException stop) {
                    return;
                }
                chain();
            }, "sparkrecover-signal-grace");
            grace.setDaemon(true);
            grace.start();
        }

        /** What the JVM would have done without us. */
        private void chain() {
            Object before = previous;
            try {
                handle.invoke(before, signal);
            } catch (ReflectiveOperationException | RuntimeException error) {
                // SIG_DFL is a native handler, which cannot be called from Java: do what it does.
                if (before != ignored) {
                    Runtime.getRuntime().exit(128 + number());
                }
            }
        }

        private int number() {
            try {
                return (Integer) signal.getClass().getMethod("getNumber").invoke(signal);
            } catch (ReflectiveOperationException | RuntimeException error) {
                return "INT".equals(name) ? 2 : 15;
            }
        }
    }
}
