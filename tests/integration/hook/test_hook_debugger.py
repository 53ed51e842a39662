#!/usr/bin/env python3
"""The hook's debugging side (issue 20 item 1): DebuggerHookConfig /
CollectionConfig validation and the save rule (DEBUG_RULES.md 5.6), the
rule_configs helpers and their YAML, and, with a broker (TW_BOOTSTRAP, as
hook_debugger.sh starts `trainwatch broker`): a real PyTorch training run
whose published TensorRecords, read back from the topic, equal the same
tensors' reductions computed here independently (numpy, float64), on the
schedule of 5.6, with a heartbeat every step and the raw-tensor cap.
Run: PYTHONPATH=build/hooks/python python3 -m unittest <this file>."""
import math
import os
import unittest
import uuid

import numpy as np
import torch

import trainwatch
from trainwatch import rule_configs
from trainwatch.debugger_config import SaveConfigMode
from trainwatch.profiler_config import ConfigError
from trainwatch.tensor_reductions import reduce

from tensor_topic import consume, consume_jobs

torch.set_num_threads(1)
BOOTSTRAP = os.environ.get("TW_BOOTSTRAP")


def expected_save(k, interval=500, steps=(), start=0, end=None):
    """DEBUG_RULES.md 5.6, written out again from its text."""
    if k in steps:
        return True
    in_range = start <= k and (end is None or k < end)
    return in_range and k % interval == 0


class Config(unittest.TestCase):
    def test_errors_name_the_key(self):
        cases = [
            (lambda: trainwatch.CollectionConfig(
                "gradients", {"save_interval": "0"}),
             "collection_configs[gradients].save_interval"),
            (lambda: trainwatch.CollectionConfig(
                "weights", {"train.save_interval": "x"}),
             "collection_configs[weights].train.save_interval"),
            (lambda: trainwatch.CollectionConfig(
                "weights", {"save_steps": "1,-2"}),
             "collection_configs[weights].save_steps"),
            (lambda: trainwatch.CollectionConfig(
                "weights", {"reductions": "mean,median"}),
             "collection_configs[weights].reductions"),
            (lambda: trainwatch.CollectionConfig(
                "weights", {"reductions": "l1"}),
             "collection_configs[weights].reductions"),
            (lambda: trainwatch.CollectionConfig(
                "weights", {"include_regex": "(unclosed"}),
             "collection_configs[weights].include_regex"),
            (lambda: trainwatch.CollectionConfig(
                "weights", {"save_intervall": "5"}),
             "collection_configs[weights].save_intervall"),
            (lambda: trainwatch.CollectionConfig(
                "weights", {"train.include_regex": "x"}),
             "collection_configs[weights].train.include_regex"),
            (lambda: trainwatch.CollectionConfig(
                "labels", {"save_raw_tensor": "yes"}),
             "collection_configs[labels].save_raw_tensor"),
            (lambda: trainwatch.CollectionConfig(
                "input_image", {"channel": "-1"}),
             "collection_configs[input_image].channel"),
            (lambda: trainwatch.CollectionConfig(
                "input_image", {"channel": 8}),
             "collection_configs[input_image].channel"),
            (lambda: trainwatch.DebuggerHookConfig(
                hook_parameters={"end_step": "-1"}),
             "hook_parameters.end_step"),
            (lambda: trainwatch.DebuggerHookConfig(
                hook_parameters={"save_all": "maybe"}),
             "hook_parameters.save_all"),
            (lambda: trainwatch.DebuggerHookConfig(
                collection_configs=["gradients"]), "collection_configs"),
            (lambda: trainwatch.DebuggerHookConfig(
                relu_threshold_inactivity=120),
             "relu_threshold_inactivity"),
            (lambda: trainwatch.DebuggerHookConfig(
                raw_tensor_max_elements=-1), "raw_tensor_max_elements"),
            (lambda: trainwatch.Hook(debugger_config={"x": 1}),
             "debugger_config"),
        ]
        for make, field in cases:
            with self.subTest(field):
                with self.assertRaises(ConfigError) as cm:
                    make()
                self.assertEqual(cm.exception.fields, (field,))
                self.assertIn(field.split(".")[-1].split("]")[0],
                              str(cm.exception))

    def test_default_collections(self):
        c = trainwatch.DebuggerHookConfig().collections
        self.assertEqual(list(c), ["losses"])  # losses always, alone
        self.assertTrue(c["losses"].save["TRAIN"].should_save(500))
        self.assertFalse(c["losses"].save["TRAIN"].should_save(499))
        c = trainwatch.DebuggerHookConfig(
            hook_parameters={"include_regex": "fc1", "save_all": "true"},
            collection_configs=[trainwatch.CollectionConfig(n) for n in (
                "weights", "biases", "gradients", "relu_output")]).collections
        self.assertEqual(set(c), {"losses", "weights", "biases", "gradients",
                                  "relu_output", "default", "all"})
        m = {n: [x.name for x in c.values() if x.matches(n)] for n in (
            "Net_fc1.weight", "gradient/Net_fc1.weight", "Net_fc1.bias",
            "CrossEntropyLoss_output_0", "CrossEntropyLoss_input_0",
            "loss_output_0", "relu_output_0", "features.1_output_0")}
        self.assertEqual(m["Net_fc1.weight"], ["weights", "default", "all"])
        self.assertEqual(m["gradient/Net_fc1.weight"],
                         ["gradients", "default", "all"])
        self.assertEqual(m["Net_fc1.bias"], ["biases", "default", "all"])
        self.assertEqual(m["CrossEntropyLoss_output_0"], ["losses", "all"])
        self.assertEqual(m["CrossEntropyLoss_input_0"], ["all"])
        self.assertEqual(m["loss_output_0"], ["losses", "all"])
        self.assertEqual(m["relu_output_0"], ["relu_output", "all"])
        # by name only the regex; the hook adds ReLU modules by type
        self.assertEqual(m["features.1_output_0"], ["all"])
        self.assertFalse(c["gradients"].saves("EVAL", 0))
        self.assertTrue(c["weights"].saves("EVAL", 0))

    def test_save_rule(self):
        # the 5.6 examples: union with save_steps, anchored at 0,
        # end exclusive, end_step 0 disables the interval
        s = SaveConfigMode(save_steps=[3, 7])
        self.assertEqual([k for k in range(1001) if s.should_save(k)],
                         [0, 3, 7, 500, 1000])
        s = SaveConfigMode(save_interval=100, start_step=150)
        self.assertEqual([k for k in range(450) if s.should_save(k)],
                         [200, 300, 400])
        s = SaveConfigMode(save_interval=2, end_step=6, save_steps=[9])
        self.assertEqual([k for k in range(12) if s.should_save(k)],
                         [0, 2, 4, 9])
        s = SaveConfigMode(end_step=0)
        self.assertEqual([k for k in range(1001) if s.should_save(k)], [])
        for k in range(60):
            for kw in ({"interval": 7, "start": 10, "end": 40},
                       {"interval": 5, "steps": (3, 50)}):
                s = SaveConfigMode(save_interval=kw["interval"],
                                   start_step=kw.get("start", 0),
                                   end_step=kw.get("end"),
                                   save_steps=kw.get("steps", ()))
                self.assertEqual(s.should_save(k), expected_save(k, **kw))

    def test_service_json(self):
        """The JSON the service hands the training container (5.5)."""
        import json
        import tempfile
        doc = {"LocalPath": "/opt/ml/output/tensors",
               "HookParameters": {"save_interval": "50",
                                  "eval.save_interval": "5"},
               "CollectionConfigurations": [
                   {"CollectionName": "gradients",
                    "CollectionParameters": {"save_interval": "100"}},
                   {"CollectionName": "relu_output",
                    "CollectionParameters": {"include_regex":
                                             ".*ReLU_output"}}]}
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump(doc, f)
            f.flush()
            os.environ["SMDEBUG_CONFIG_FILE_PATH"] = f.name
            try:
                cfg = trainwatch.DebuggerHookConfig.from_json_file()
            finally:
                del os.environ["SMDEBUG_CONFIG_FILE_PATH"]
        c = cfg.collections
        self.assertEqual(set(c), {"losses", "gradients", "relu_output"})
        self.assertEqual(c["gradients"].save["TRAIN"].save_interval, 100)
        self.assertEqual(c["losses"].save["EVAL"].save_interval, 5)
        self.assertEqual(c["losses"].save["TRAIN"].save_interval, 50)
        self.assertTrue(c["relu_output"].matches("net.ReLU_output_0"))
        self.assertEqual(cfg.to_json(), doc)
        bad = dict(doc, CollectionConfigurations=[
            {"CollectionName": "weights",
             "CollectionParameters": {"save_interval": "0"}}])
        with self.assertRaises(ConfigError) as cm:
            trainwatch.DebuggerHookConfig.from_json(json.dumps(bad))
        self.assertEqual(cm.exception.fields,
                         ("collection_configs[weights].save_interval",))
        with self.assertRaises(ConfigError) as cm:
            trainwatch.DebuggerHookConfig.from_json_file("/nonexistent.json")
        self.assertIn("/nonexistent.json", str(cm.exception))

    def test_mode_prefixes_and_collection_override(self):
        cfg = trainwatch.DebuggerHookConfig(
            hook_parameters={"save_interval": "100", "eval.save_interval":
                             "10", "train.start_step": "5"},
            collection_configs=[trainwatch.CollectionConfig(
                "gradients", {"save_interval": "50",
                              "global.save_interval": "7"})])
        g = cfg.collections["gradients"].save
        lo = cfg.collections["losses"].save
        self.assertEqual(lo["TRAIN"].save_interval, 100)
        self.assertEqual(lo["TRAIN"].start_step, 5)
        self.assertEqual(lo["EVAL"].save_interval, 10)
        self.assertEqual(lo["EVAL"].start_step, 0)
        # the collection's unprefixed key overrides the hook's per mode
        self.assertEqual(g["TRAIN"].save_interval, 50)
        self.assertEqual(g["EVAL"].save_interval, 50)
        self.assertEqual(g["TRAIN"].start_step, 5)
        self.assertEqual(g["GLOBAL"].save_interval, 7)


class RuleConfigs(unittest.TestCase):
    def test_helpers_and_yaml(self):
        helpers = ["vanishing_gradient", "exploding_tensor",
                   "loss_not_decreasing", "overfit", "overtraining",
                   "weight_update_ratio", "unchanged_tensor", "dead_relu",
                   "stalled_training_rule", "tensor_variance", "all_zero",
                   "poor_weight_initialization", "class_imbalance",
                   "confusion", "check_input_images",
                   "saturated_activation"]
        for h in helpers:
            base = getattr(rule_configs, h)()
            name = base["DebugRuleConfiguration"]["RuleParameters"][
                "rule_to_invoke"]
            self.assertIn(name, rule_configs.PARAMETERS)
        vg = rule_configs.vanishing_gradient()
        self.assertEqual(vg["CollectionConfigurations"], [
            {"CollectionName": "gradients",
             "CollectionParameters": {"save_interval": "500"}}])
        rules = [
            trainwatch.Rule.sagemaker(rule_configs.vanishing_gradient()),
            trainwatch.Rule.sagemaker(
                rule_configs.loss_not_decreasing(),
                rule_parameters={"num_steps": 20, "diff_percent": 0.5},
                actions=rule_configs.ActionList(
                    rule_configs.StopTraining())),
            trainwatch.Rule.sagemaker(
                rule_configs.exploding_tensor(), name="Exploding2",
                rule_parameters={"collection_names": ["gradients",
                                                      "weights"]},
                collections_to_save=[trainwatch.CollectionConfig(
                    "weights", {"save_interval": "10"})])]
        y = rule_configs.rules_yaml(rules, stop_file="/tmp/{job}.stop")
        self.assertEqual(y, """rules:
  - name: "VanishingGradient"
  - name: "LossNotDecreasing"
    parameters:
      num_steps: "20"
      diff_percent: "0.5"
    actions:
      - type: "stop_file"
        path: "/tmp/{job}.stop"
  - name: "Exploding2"
    rule: "ExplodingTensor"
    parameters:
      collection_names: "gradients,weights"
""")
        hc = rule_configs.hook_config(rules)
        self.assertEqual(set(hc.collections), {"losses", "gradients",
                                               "weights"})
        # collections_to_save replaced the rule's own (none here)
        self.assertEqual(hc.collections["weights"].save["TRAIN"]
                         .save_interval, 10)
        with self.assertRaises(ConfigError) as cm:
            trainwatch.Rule.sagemaker(rule_configs.dead_relu(),
                                      rule_parameters={"threshold": 3})
        self.assertEqual(cm.exception.fields, ("rule_parameters.threshold",))
        self.assertIn("threshold_layer", str(cm.exception))
        with self.assertRaises(ConfigError):
            rule_configs.rules_yaml([rules[0], rules[0]])

    @unittest.skipUnless(os.environ.get("TW_BUILD_DIR"), "needs the build")
    def test_yaml_loads_in_the_engine(self):
        """The rendered shape passes `run --check` (with a rule the engine
        has today: the debugging rules come with their plugins)."""
        import subprocess
        import tempfile
        r = trainwatch.Rule("StepOutlier", "StepOutlier",
                            {"n_outliers": "3"}, [],
                            [rule_configs.StopTraining()])
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            f.write(rule_configs.rules_yaml([r], stop_file="/tmp/{job}.s"))
            f.flush()
            tw = os.path.join(os.environ["TW_BUILD_DIR"], "trainwatch")
            p = subprocess.run([tw, "run", "--config", f.name, "--check",
                                "--brokers", "127.0.0.1:9"],
                               capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr + p.stdout)


class Reductions(unittest.TestCase):
    """tensor_reductions.reduce against numpy on the same values."""

    def test_against_numpy(self):
        g = torch.Generator().manual_seed(3)
        x = torch.randn(6, 5, generator=g)
        x[0, 0] = 0.0
        x[1, :] = -1.0
        x[2, 3] = float("nan")
        x[4, 1] = float("inf")
        prev = torch.randn(6, 5, generator=g)
        ops = ("abs_mean", "nan_count", "inf_count", "l2", "update_l2",
               "variance", "zero_fraction", "mean", "abs_max", "l1", "sum")
        v = reduce(x, ops, prev).tolist()
        a = x.numpy().astype(np.float64)
        self.assertEqual(v[1], 1.0)
        self.assertEqual(v[2], 1.0)
        self.assertTrue(all(math.isnan(z) or math.isinf(z) for z in
                            (v[0], v[3], v[4], v[5])))
        f = torch.randn(64, 7, generator=g)
        f[:, 2] = torch.relu(f[:, 2]) * 0  # dead node
        f[:60, 4] = 0                      # active in 4/64 = 6.25 %
        ops = ("abs_mean", "l2", "update_l2", "variance", "std", "mean",
               "min", "max", "abs_min", "l1", "zero_fraction", "p5", "p95",
               "dead_fraction", "value")
        p = torch.randn(64, 7, generator=g)
        v = reduce(f, ops, p, threshold_inactivity=10.0).tolist()
        a = f.numpy().astype(np.float64)
        act = (a > 0).mean(0) * 100
        want = [np.abs(a).mean(), np.sqrt((a * a).sum()),
                np.sqrt(((a - p.numpy().astype(np.float64)) ** 2).sum()),
                a.var(), a.std(), a.mean(), a.min(), a.max(),
                np.abs(a).min(), np.abs(a).sum(), (a == 0).mean(),
                np.percentile(a, 5), np.percentile(a, 95),
                (act < 10.0).mean(), a.mean()]
        for op, got, w in zip(ops, v, want):
            self.assertAlmostEqual(got, float(w), places=10, msg=op)
        self.assertAlmostEqual(v[13], 2 / 7)


class ChannelSums(unittest.TestCase):
    """CheckInputImages' reductions against numpy, and the collection
    input_image: the root input, the channel axis, the channel cap."""

    def test_against_numpy(self):
        g = torch.Generator().manual_seed(5)
        x = torch.rand(4, 3, 5, 6, generator=g)
        ops = ["channel_sum/0", "channel_sum/1", "channel_sum/2",
               "channel_count", "channel_axis"]
        a = x.numpy().astype(np.float64)
        v = reduce(x, ops, channel_axis=1).tolist()
        want = list(a.sum(axis=(0, 2, 3))) + [120.0, 1.0]
        for op, got, w in zip(ops, v, want):
            self.assertAlmostEqual(got, float(w), places=9, msg=op)
        y = x.permute(0, 2, 3, 1).contiguous()  # NHWC, channel 3
        v = reduce(y, ops, channel_axis=3).tolist()
        for op, got, w in zip(ops, v, list(a.sum(axis=(0, 2, 3))) +
                              [120.0, 3.0]):
            self.assertAlmostEqual(got, float(w), places=9, msg=op)

    def records(self, model, x, params=None, rule_params=None):
        from trainwatch.debugger import Debugger
        from trainwatch.sender import SenderStats
        rule = trainwatch.Rule.sagemaker(rule_configs.check_input_images(),
                                         rule_parameters=rule_params)
        extra = [trainwatch.CollectionConfig("input_image", dict(
            {"save_interval": "1"}, **(params or {})))]
        cfg = rule_configs.hook_config([rule], collection_configs=extra)
        out = []
        d = Debugger(cfg, out.append, SenderStats())
        d.watch(model)
        d.step_begin("TRAIN", 0, 0)
        model(x)
        return [r for r in out if r[0] != "heartbeat"]

    def test_collection(self):
        class ImageNet(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv1 = torch.nn.Conv2d(3, 2, 1)

            def forward(self, x):
                return self.conv1(x)
        m = ImageNet()
        x = torch.rand(2, 3, 4, 4)
        # the reference's (MXNet) regex: the root input, nothing else
        recs = self.records(m, x)
        self.assertEqual([r[0] for r in recs], ["ImageNet_input_0"])
        ops = recs[0][9]
        self.assertEqual(ops[-5:], ("channel_sum/0", "channel_sum/1",
                                    "channel_sum/2", "channel_count",
                                    "channel_axis"))
        vals = recs[0][10].tolist()
        self.assertAlmostEqual(vals[ops.index("channel_sum/2")],
                               float(x[:, 2].double().sum()), places=9)
        self.assertEqual(vals[ops.index("channel_count")], 32.0)
        # the rule's regex: that tensor instead of the root input
        recs = self.records(m, x, rule_params={"regex": "conv1_input_0"})
        self.assertEqual([r[0] for r in recs], ["conv1_input_0"])
        # the rule's channel goes to the collection: NHWC sums along 3
        xl = torch.rand(2, 4, 4, 3)
        recs = self.records(torch.nn.Identity(), xl,
                            rule_params={"channel": 3})
        ops, vals = recs[0][9], recs[0][10].tolist()
        self.assertEqual(vals[ops.index("channel_axis")], 3.0)
        self.assertAlmostEqual(vals[ops.index("channel_sum/1")],
                               float(xl[..., 1].double().sum()), places=9)
        # more than 64 channels: the record without channel sums, warned
        with self.assertLogs("trainwatch", "WARNING") as log:
            recs = self.records(torch.nn.Identity(), torch.rand(1, 65, 2))
        self.assertFalse(any(o.startswith("channel_") for o in recs[0][9]))
        self.assertIn("no channel sums", log.output[0])


class Naming(unittest.TestCase):
    """Tensor names of 5.3 (the Debugger alone, records into a list)."""

    def test_names_and_counters(self):
        from trainwatch.debugger import Debugger
        from trainwatch.sender import SenderStats
        cfg = trainwatch.DebuggerHookConfig(
            hook_parameters={"save_interval": "1"},
            collection_configs=[trainwatch.CollectionConfig(
                "outs", {"include_regex": "_output_"})])
        out = []
        d = Debugger(cfg, out.append, SenderStats())
        m = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh())
        self.assertTrue(d.watch(m))
        self.assertEqual(d.watch(m), [])  # twice: hooked once
        d.watch_loss(torch.nn.MSELoss())
        for step in range(2):
            d.step_begin("TRAIN", step, 0)
            m(torch.ones(1, 3))
            m(torch.ones(1, 3))  # called twice: _output_1
            d.record_loss(torch.tensor(0.5))
            d.record_loss(torch.tensor(0.25), "aux_loss")
        names = [(r[2], r[0]) for r in out if r[0] != "heartbeat"]
        want = []
        for step in range(2):
            want += [(step, "Sequential_output_0"), (step, "0_output_0"),
                     (step, "1_output_0"), (step, "Sequential_output_1"),
                     (step, "0_output_1"), (step, "1_output_1"),
                     (step, "loss_output_0"), (step, "aux_loss_output_0")]
        self.assertEqual(sorted(names), sorted(want))
        losses = [r for r in out if r[0] == "aux_loss_output_0"]
        self.assertEqual(losses[0][1], ("losses", "outs"))
        self.assertEqual(losses[0][9], ("value",))


class Batching(unittest.TestCase):
    def test_batches_stay_small(self):
        """Records with raw values at the cap are sent in batches under
        Kafka's 1 MB limit, in order, every one (no broker: a recording
        producer)."""
        from trainwatch.sender import Sender
        from trainwatch.wire.Batch import Batch

        class Producer:
            def __init__(self):
                self.msgs = []

            def produce(self, topic, value, key, on_delivery):
                self.msgs.append(value)
                on_delivery(None, None)

            def poll(self, t):
                return 0

            def flush(self, t):
                return 0
        p = Producer()
        s = Sender(p, "t", "job", "node", flush_interval=60)
        raw = torch.arange(4096, dtype=torch.float64)
        vals = torch.zeros(3, dtype=torch.float64)
        n = 600
        for i in range(n):
            s.tensor((f"labels{i}", ("labels",), i, "TRAIN", i, 1, "int64",
                      (4096,), 4096, ("nan_count", "inf_count", "mean"),
                      vals, raw, -1))
        s.close(30)
        self.assertGreater(len(p.msgs), 5)
        self.assertLess(max(len(m) for m in p.msgs), 1000 * 1000)
        got = []
        for m in p.msgs:
            b = Batch.GetRootAs(m, 0)
            got += [b.Tensors(k).Name().decode()
                    for k in range(b.TensorsLength())]
        self.assertEqual(got, [f"labels{i}" for i in range(n)])


# ---- published through the broker --------------------------------------
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(torch.nn.Linear(8, 16),
                                            torch.nn.ReLU())
        self.fc1 = torch.nn.Linear(16, 12)
        self.relu = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(12, 3)
        with torch.no_grad():
            self.fc1.bias[:6] = -50.0  # half of relu's nodes dead

    def forward(self, x):
        return self.fc2(self.relu(self.fc1(self.features(x))))


@unittest.skipUnless(BOOTSTRAP, "needs a broker: TW_BOOTSTRAP")
class Published(unittest.TestCase):
    TRAIN, EVAL = 10, 3

    def test_records_equal_independent_computation(self):
        torch.manual_seed(0)
        job = "dbg-" + uuid.uuid4().hex[:8]
        cfg = trainwatch.DebuggerHookConfig(
            hook_parameters={"save_interval": "4", "eval.save_interval":
                             "1"},
            collection_configs=[
                trainwatch.CollectionConfig("gradients",
                                            {"save_interval": "3"}),
                trainwatch.CollectionConfig("weights", {
                    "save_interval": "2", "save_steps": "5"}),
                trainwatch.CollectionConfig("biases", {
                    "start_step": "3", "save_interval": "2",
                    "end_step": "8"}),
                trainwatch.CollectionConfig("relu_output",
                                            {"save_interval": "1"}),
                trainwatch.CollectionConfig("relu_input", {
                    "end_step": "0", "save_steps": "1"}),
                trainwatch.CollectionConfig("labels", {
                    "save_raw_tensor": True, "save_interval": "1"})],
            quantile_steps=2, relu_threshold_inactivity=1.0,
            raw_tensor_max_elements=16)
        model = Net()
        crit = torch.nn.CrossEntropyLoss()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        hook = trainwatch.Hook(job=job, brokers=BOOTSTRAP,
                               debugger_config=cfg, flush_interval=0.2)
        hook.watch(model, optimizer=opt, loss=crit)
        # what the test sees of the same tensors, by (global step, name)
        seen = {}
        step = [-1]
        hooked = []
        for path, prm in model.named_parameters():
            hooked.append(prm.register_hook(
                lambda g, n=f"gradient/Net_{path}": seen.__setitem__(
                    (step[0], n), g.detach().numpy().astype(np.float64))))

        def keep(name):
            def f(mod, inp, out):
                seen[(step[0], name + "_input_0")] = \
                    inp[0].detach().numpy().astype(np.float64)
                seen[(step[0], name + "_output_0")] = \
                    out.detach().numpy().astype(np.float64)
            return f
        hooked.append(model.features[1].register_forward_hook(
            keep("features.1")))
        hooked.append(model.relu.register_forward_hook(keep("relu")))
        g = torch.Generator().manual_seed(1)
        big = torch.arange(100.0)
        for i in range(self.TRAIN + self.EVAL):
            training = i < self.TRAIN
            model.train(training)
            step[0] = i
            for path, prm in model.named_parameters():
                seen[(i, f"Net_{path}")] = \
                    prm.detach().numpy().astype(np.float64).copy()
            x = torch.randn(8, 8, generator=g)
            y = torch.randint(0, 3, (8,), generator=g)
            with torch.set_grad_enabled(training):
                loss = crit(model(x), y)
            seen[(i, "CrossEntropyLoss_output_0")] = float(loss)
            hook.save_tensor("labels", y, "labels")
            hook.save_tensor("big_labels", big, "labels")
            seen[(i, "labels")] = y.numpy().astype(np.float64)
            if training:
                opt.zero_grad()
                loss.backward()
                opt.step()
        for h in hooked:
            h.remove()
        stats = hook.close()
        self.assertEqual(stats["dropped"], 0)
        self.assertEqual(stats["raw_cut"], self.TRAIN + self.EVAL)
        recs, nbytes = consume(BOOTSTRAP, job)
        self.assertGreater(nbytes, 0)
        self.check_heartbeats(recs)
        self.check_schedule(recs)
        self.check_values(recs, seen)

    def mode_of(self, i):
        return ("TRAIN", i) if i < self.TRAIN else ("EVAL", i - self.TRAIN)

    def check_heartbeats(self, recs):
        hb = [r for r in recs if r["name"] == "heartbeat"]
        self.assertEqual([r["step"] for r in hb],
                         list(range(self.TRAIN + self.EVAL)))
        for r in hb:
            self.assertEqual((r["mode"], r["mode_step"]),
                             self.mode_of(r["step"]))
            self.assertEqual((r["red"], r["raw"], r["numel"]), ({}, None, 0))

    def check_schedule(self, recs):
        got = {}
        for r in recs:
            if r["name"] != "heartbeat":
                got.setdefault(r["name"], []).append(r["step"])
        want = {}
        params = ["features.0.weight", "features.0.bias", "fc1.weight",
                  "fc1.bias", "fc2.weight", "fc2.bias"]
        for i in range(self.TRAIN + self.EVAL):
            mode, k = self.mode_of(i)
            names = []
            if expected_save(k, 1 if mode == "EVAL" else 4):
                names.append("CrossEntropyLoss_output_0")
            if mode == "TRAIN" and expected_save(k, 3):
                names += [f"gradient/Net_{p}" for p in params]
            if expected_save(k, 2, steps=(5,)):
                names += [f"Net_{p}" for p in params if "weight" in p]
            if expected_save(k, 2, start=3, end=8):
                names += [f"Net_{p}" for p in params if "bias" in p]
            names += ["features.1_output_0", "relu_output_0"]
            if expected_save(k, 500, steps=(1,), end=0):
                names += ["features.1_input_0", "relu_input_0"]
            names += ["labels", "big_labels"]
            for n in names:
                want.setdefault(n, []).append(i)
        self.assertEqual({n: sorted(s) for n, s in got.items()},
                         {n: sorted(s) for n, s in want.items()})
        # the EVAL loss every step, the train loss at 0, 4, 8
        self.assertEqual(got["CrossEntropyLoss_output_0"],
                         [0, 4, 8, 10, 11, 12])

    def check_values(self, recs, seen):
        prev_w = {}
        n_checked = 0
        for r in sorted(recs, key=lambda r: r["step"]):
            name, i, red = r["name"], r["step"], r["red"]
            if name == "heartbeat":
                continue
            mode, k = self.mode_of(i)
            self.assertEqual((r["mode"], r["mode_step"]), (mode, k), name)
            if name == "big_labels":
                self.assertIsNone(r["raw"])  # 100 elements > cap 16
                self.assertEqual(r["numel"], 100)
                continue
            a = seen[(i, name)]
            if name.startswith("CrossEntropyLoss"):
                self.assertEqual(set(red), {"value"})
                self.assertAlmostEqual(red["value"], a, places=6)
                self.assertEqual(r["collections"], ["losses"])
                n_checked += 1
                continue
            self.assertEqual(r["shape"], list(a.shape), name)
            self.assertEqual(r["numel"], a.size, name)
            self.assertEqual(red["nan_count"], float(np.isnan(a).sum()))
            self.assertEqual(red["inf_count"], float(np.isinf(a).sum()))
            if name == "labels":
                self.assertEqual(r["raw"], a.tolist())
                self.assertEqual(r["dtype"], "int64")
            elif name.startswith("gradient/"):
                self.assertAlmostEqual(red["abs_mean"], np.abs(a).mean(),
                                       places=12)
                if k < 2:  # quantile_steps 2
                    self.assertAlmostEqual(red["p5"], np.percentile(a, 5),
                                           places=12)
                    self.assertAlmostEqual(red["p95"],
                                           np.percentile(a, 95), places=12)
                else:
                    self.assertNotIn("p5", red)
                self.assertEqual(r["collections"], ["gradients"])
            elif name.startswith("Net_"):
                self.assertAlmostEqual(red["l2"], np.sqrt((a * a).sum()),
                                       places=10)
                self.assertAlmostEqual(red["variance"], a.var(), places=12)
                if name in prev_w:
                    p_step, p_val = prev_w[name]
                    self.assertEqual(r["prev_step"], p_step)
                    self.assertAlmostEqual(
                        red["update_l2"],
                        np.sqrt(((a - p_val) ** 2).sum()), places=10)
                else:
                    self.assertEqual(r["prev_step"], -1)
                    self.assertNotIn("update_l2", red)
                prev_w[name] = (i, a)
            elif name.endswith("_output_0"):
                act = (a.reshape(a.shape[0], -1) > 0).mean(0) * 100
                self.assertAlmostEqual(red["dead_fraction"],
                                       (act < 1.0).mean(), places=12)
                self.assertAlmostEqual(red["zero_fraction"],
                                       (a == 0).mean(), places=12)
                self.assertEqual(r["collections"], ["relu_output"])
                if name == "relu_output_0":
                    self.assertGreaterEqual(red["dead_fraction"], 0.5)
            elif name.endswith("_input_0"):
                self.assertAlmostEqual(red["variance"], a.var(), places=12)
            else:
                self.fail(f"unexpected record {name}")
            n_checked += 1
        self.assertGreater(n_checked, 100)


@unittest.skipUnless(BOOTSTRAP, "needs a broker: TW_BOOTSTRAP")
class Scenarios(unittest.TestCase):
    """debug_train.py's pathologies publish the signal each rule needs."""

    def test_pathologies(self):
        import debug_train
        tag = uuid.uuid4().hex[:6]
        jobs, faults = {}, {}
        for s in debug_train.SCENARIOS:
            jobs[s] = f"{s}-{tag}"
            faults[s], st = debug_train.run([
                "--job", jobs[s], "--brokers", BOOTSTRAP, "--scenario", s,
                "--quiet", "--stall-s", "1.5"])
            self.assertEqual((st["dropped"], st["undelivered"]), (0, 0))
        got, _ = consume_jobs(BOOTSTRAP, list(jobs.values()))
        r = {s: got[j] for s, j in jobs.items()}

        def series(s, name, op, mode="TRAIN"):
            return [x["red"][op] for x in sorted(r[s], key=lambda x: x[
                "step"]) if x["name"] == name and x["mode"] == mode
                and op in x["red"]]
        loss = "CrossEntropyLoss_output_0"
        # (a) healthy: the loss falls, weights move, nothing non-finite
        h = series("healthy", loss, "value")
        self.assertEqual(len(h), 40)
        self.assertLess(h[-1], 0.85 * h[0])
        # and by more than LossNotDecreasing's 0.1 % over any 10 steps
        self.assertTrue(all(h[i + 10] < 0.999 * h[i] for i in range(30)))
        self.assertTrue(all(v > 0 for v in
                            series("healthy", "Net_fc2.weight",
                                   "update_l2")))
        self.assertFalse([x["name"] for x in r["healthy"]
                          if x["red"].get("nan_count", 0)
                          or x["red"].get("inf_count", 0)])
        # (b) lr 0 / no parameters: the same loss every step, no update
        for s in ("lr0", "noparams"):
            v = series(s, loss, "value")
            self.assertEqual(len(set(v)), 1, s)
            for n in ("Net_body.weight", "Net_fc2.weight"):
                u = series(s, n, "update_l2")
                self.assertEqual((len(u), set(u)), (39, {0.0}), (s, n))
        # (c) lr 1e3: NaN from the fault step on, in the loss and counts
        f = faults["explode"]
        self.assertGreater(f, 0)
        v = series("explode", loss, "value")
        self.assertTrue(all(math.isfinite(z) for z in v[:f]))
        self.assertTrue(math.isnan(v[f]))
        nan_steps = sorted({x["step"] for x in r["explode"]
                            if x["red"].get("nan_count", 0) > 0})
        self.assertTrue(nan_steps and nan_steps[0] <= f + 1, nan_steps)
        # (d) deep sigmoid: the first layers' gradients vanish
        g = series("sigmoid", "gradient/Net_body.0.weight", "abs_mean")
        self.assertEqual(len(g), 40)
        self.assertLess(max(g), 1e-7)
        self.assertGreater(min(series("sigmoid", "gradient/Net_fc2.weight",
                                      "abs_mean")), 1e-7)
        # (e) bias -50 before the ReLU: every node dead, healthy not
        self.assertEqual(set(series("deadrelu", "relu_output_0",
                                    "dead_fraction")), {1.0})
        self.assertLess(max(series("healthy", "relu_output_0",
                                   "dead_fraction")), 0.5)
        # (f) a stalled step: the heartbeats stop for the stall
        hb = sorted((x["step"], x["wall_us"]) for x in r["stall"]
                    if x["name"] == "heartbeat")
        gaps = [(b[1] - a[1]) / 1e6 for a, b in zip(hb, hb[1:])]
        self.assertGreaterEqual(gaps[faults["stall"] - 1], 1.5)
        self.assertLess(max(gaps[:faults["stall"] - 1]), 1.0)
        # (g) 8 training samples: the evaluation loss ends well above
        # the training loss (Overfit's ratio_threshold 0.1)
        tr = series("overfit", loss, "value")
        ev = series("overfit", loss, "value", "EVAL")
        self.assertEqual(len(ev), 8)
        self.assertGreater(ev[-1], 1.1 * tr[-1])
        self.assertGreater(ev[-1], ev[0])


if __name__ == "__main__":
    unittest.main()
