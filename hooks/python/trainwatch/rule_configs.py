"""The managed service's SDK rule helpers, for trainwatch: a notebook that
did

    from sagemaker.debugger import (Rule, rule_configs, CollectionConfig,
                                    DebuggerHookConfig)
    rules = [Rule.sagemaker(rule_configs.vanishing_gradient()),
             Rule.sagemaker(rule_configs.loss_not_decreasing(),
                            rule_parameters={"num_steps": "20"},
                            actions=rule_configs.ActionList(
                                rule_configs.StopTraining()))]

does the same with `from trainwatch import Rule, rule_configs,
CollectionConfig, DebuggerHookConfig`, then renders trainwatch's rule
configuration (the `rules:` list of the configuration file, README
"Configuration keys") with rule_configs.rules_yaml(rules) or
write_rules_yaml(path, rules), and gives the collections the rules ask
the hook to save with hook_config(rules).

Each helper returns the SDK's base-config dict (DebugRuleConfiguration
with rule_to_invoke, and the CollectionConfigurations the service's
rules config asks for, DEBUG_RULES.md 4.0). Rule parameters and their
defaults are the reference's (DEBUG_RULES.md 4); a parameter name the
rule does not have is a ConfigError naming it; values travel as the
SDK sends them (str() of the value; lists as CSV) and only the ones
given are written: the engine's rule applies its defaults to the rest.
"""
import json

from .debugger_config import CollectionConfig, DebuggerHookConfig
from .profiler_config import ConfigError

# rule -> {parameter: default}; None = no default (Python None)
PARAMETERS = {
    "VanishingGradient": {"threshold": 1e-7},
    "ExplodingTensor": {"collection_names": None, "tensor_regex": None,
                        "only_nan": False},
    "SimilarAcrossRuns": {"other_trials": None, "collection_names": None,
                          "tensor_regex": None},
    "WeightUpdateRatio": {"num_steps": None, "large_threshold": 10.0,
                          "small_threshold": 1e-8, "epsilon": 1e-9},
    "AllZero": {"collection_names": None, "tensor_regex": None,
                "threshold": 100.0},
    "UnchangedTensor": {"collection_names": None, "tensor_regex": None,
                        "num_steps": 3, "rtol": 1e-5, "atol": 1e-8,
                        "equal_nan": False},
    "LossNotDecreasing": {"collection_names": None, "tensor_regex": None,
                          "use_losses_collection": True, "num_steps": 10,
                          "diff_percent": 0.1,
                          "increase_threshold_percent": 5.0, "mode": None},
    "CheckInputImages": {"threshold_mean": 0.2, "threshold_samples": 500,
                         "regex": ".*hybridsequential0_input_0",
                         "channel": 1},
    "NLPSequenceRatio": {"tensor_regex": ".*embedding0_input_0",
                         "token_values": "0",
                         "token_thresholds_percent": "50"},
    "DeadRelu": {"tensor_regex": ".*relu_output",
                 "threshold_inactivity": 1.0, "threshold_layer": 50.0},
    "Confusion": {"category_no": None, "labels": "labels",
                  "predictions": "predictions",
                  "labels_collection": "labels",
                  "predictions_collection": "predictions",
                  "min_diag": 0.9, "max_off_diag": 0.1},
    "ClassImbalance": {"threshold_imbalance": 10.0,
                       "threshold_misprediction": 0.7, "samples": 500,
                       "argmax": False, "labels_regex": ".*labels",
                       "predictions_regex": ".*predictions"},
    "Overfit": {"tensor_regex": None, "start_step": 0, "patience": 1,
                "ratio_threshold": 0.1},
    "Overtraining": {"patience_train": 5, "patience_validation": 10,
                     "delta": 0.01},
    "PoorWeightInitialization": {"activation_inputs_regex": ".*relu_input",
                                 "threshold": 10.0,
                                 "distribution_range": 0.001,
                                 "patience": 5, "steps": 10},
    "SaturatedActivation": {"collection_names": None,
                            "tensor_regex": ".*tanh_input|.*sigmoid_input",
                            "threshold_tanh_min": -9.4999,
                            "threshold_tanh_max": 9.4999,
                            "threshold_sigmoid_min": -23.0,
                            "threshold_sigmoid_max": 16.99999,
                            "threshold_inactivity": 1.0,
                            "threshold_layer": 50.0},
    "TensorVariance": {"collection_names": None, "tensor_regex": None,
                       "max_threshold": None, "min_threshold": None},
    "StalledTrainingRule": {"threshold": 1800,
                            "stop_training_on_fire": False,
                            "training_job_name_prefix": None},
    "FeatureImportanceOverweight": {"threshold": 0.8, "nfeatures": 3,
                                    "tensor_regex":
                                    ".*feature_importance/weight"},
    "TreeDepth": {"depth": 4},
}

# the CollectionConfigurations the service's rules config asks for (4.0)
_COLLECTIONS = {
    "VanishingGradient": [("gradients", {"save_interval": "500"})],
    "LossNotDecreasing": [("losses", {"save_interval": "500"})],
    "WeightUpdateRatio": [("weights", {"save_interval": "500"})],
    "CheckInputImages": [("input_image", {
        "include_regex": ".*hybridsequential0_input_0",
        "save_interval": "500"})],
    "DeadRelu": [("relu_output", {"include_regex": ".*relu_output",
                                  "save_interval": "500"})],
    "PoorWeightInitialization": [("relu_input", {
        "include_regex": ".*relu_input", "save_interval": "500"})],
    "NLPSequenceRatio": [("input_sequence", {
        "include_regex": ".*embedding0_input_0", "save_interval": "500"})],
    "FeatureImportanceOverweight": [("feature_importance",
                                     {"save_interval": "500"})],
}


def _base(rule):
    return {"DebugRuleConfiguration": {
        "RuleConfigurationName": rule,
        "RuleParameters": {"rule_to_invoke": rule}},
        "CollectionConfigurations": [
            {"CollectionName": n, "CollectionParameters": dict(p)}
            for n, p in _COLLECTIONS.get(rule, [])]}


def vanishing_gradient():
    return _base("VanishingGradient")


def exploding_tensor():
    return _base("ExplodingTensor")


def similar_across_runs():
    return _base("SimilarAcrossRuns")


def weight_update_ratio():
    return _base("WeightUpdateRatio")


def all_zero():
    return _base("AllZero")


def unchanged_tensor():
    return _base("UnchangedTensor")


def loss_not_decreasing():
    return _base("LossNotDecreasing")


def check_input_images():
    return _base("CheckInputImages")


def nlp_sequence_ratio():
    return _base("NLPSequenceRatio")


def dead_relu():
    return _base("DeadRelu")


def confusion():
    return _base("Confusion")


def class_imbalance():
    return _base("ClassImbalance")


def overfit():
    return _base("Overfit")


def overtraining():
    return _base("Overtraining")


def poor_weight_initialization():
    return _base("PoorWeightInitialization")


def saturated_activation():
    return _base("SaturatedActivation")


def tensor_variance():
    return _base("TensorVariance")


def stalled_training_rule():
    return _base("StalledTrainingRule")


def feature_importance_overweight():
    return _base("FeatureImportanceOverweight")


def tree_depth():
    return _base("TreeDepth")


# ---- actions (the SDK's smdebug_rulesconfig.actions) ----------------------
class StopTraining:
    """Stop the training. Rendered as a `stop_file` action when a stop
    file is known (this action's stop_file, else the one given to
    rules_yaml; the hook's stop_file channel then ends the script at its
    next step), else as `stop_training` (the managed service's job,
    training_job_prefix)."""

    def __init__(self, training_job_prefix=None, stop_file=None):
        self.training_job_prefix = training_job_prefix
        self.stop_file = stop_file

    def render(self, stop_file):
        path = self.stop_file or stop_file
        if path:
            return {"type": "stop_file", "path": path}
        d = {"type": "stop_training"}
        if self.training_job_prefix:
            d["training_job_prefix"] = self.training_job_prefix
        return d


class Email:
    """An e-mail on a finding; trainwatch sends it itself, so it needs
    the SMTP server (smtp_url, e.g. smtp://mail:25)."""

    def __init__(self, email_address, smtp_url=None):
        self.email_address = email_address
        self.smtp_url = smtp_url

    def render(self, stop_file):
        d = {"type": "email", "to": [self.email_address]}
        if self.smtp_url:
            d["smtp_url"] = self.smtp_url
        return d


class SMS:
    def __init__(self, phone_number):
        self.phone_number = phone_number

    def render(self, stop_file):
        return {"type": "sms", "phone": self.phone_number}


class ActionList:
    def __init__(self, *actions):
        for a in actions:
            if not hasattr(a, "render"):
                raise ConfigError(f"ActionList takes StopTraining, Email or "
                                  f"SMS objects, not {a!r}", ["actions"])
        self.actions = list(actions)


# ---- rules -----------------------------------------------------------------
def _text(v):
    """A parameter value as the SDK sends it (str(); lists as CSV)."""
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    return str(v)


def _follow_rule(rule, collection, cparams, rparams):
    """CheckInputImages' collection input_image takes the rule's regex and
    channel when given (the SDK leaves the collection at MXNet's regex and
    NCHW, so the rule would watch a tensor that is not saved, or summed
    along another axis): the hook then saves the tensor the rule reads."""
    cparams = dict(cparams or {})
    if rule == "CheckInputImages" and collection == "input_image":
        if "regex" in rparams:
            cparams["include_regex"] = rparams["regex"]
        if "channel" in rparams:
            cparams["channel"] = rparams["channel"]
    return cparams


class Rule:
    """A rule to run: Rule.sagemaker(base_config, ...) as in the SDK."""

    def __init__(self, name, rule, parameters, collections, actions):
        self.name = name
        self.rule = rule
        self.rule_parameters = parameters
        self.collection_configs = collections
        self.actions = actions

    @classmethod
    def sagemaker(cls, base_config, name=None, container_local_output_path=None,
                  s3_output_path=None, other_trials_s3_input_paths=None,
                  rule_parameters=None, collections_to_save=None,
                  actions=None):
        try:
            cfg = base_config["DebugRuleConfiguration"]
            rule = cfg["RuleParameters"]["rule_to_invoke"]
        except (TypeError, KeyError):
            raise ConfigError("base_config must be a rule_configs helper's "
                              f"result, not {base_config!r}",
                              ["base_config"]) from None
        known = PARAMETERS.get(rule)
        if known is None:
            raise ConfigError(f"unknown rule {rule!r}; rules: "
                              f"{', '.join(sorted(PARAMETERS))}",
                              ["rule_to_invoke"])
        params = {}
        for k, v in (rule_parameters or {}).items():
            if k == "rule_to_invoke":
                raise ConfigError("rule_parameters cannot set rule_to_invoke"
                                  " (the base config names the rule)",
                                  ["rule_parameters.rule_to_invoke"])
            if k not in known:
                raise ConfigError(f"{rule} has no parameter {k!r}; its "
                                  f"parameters: {', '.join(known)}",
                                  [f"rule_parameters.{k}"])
            params[k] = _text(v)
        for i, path in enumerate(other_trials_s3_input_paths or []):
            params[f"other_trial_{i}"] = str(path)
        if collections_to_save is not None:
            colls = list(collections_to_save)  # replaces the base's (2.3)
        else:
            colls = [CollectionConfig(c["CollectionName"],
                                      _follow_rule(rule, c["CollectionName"],
                                                   c.get("CollectionParameters"),
                                                   params))
                     for c in base_config.get("CollectionConfigurations",
                                              [])]
        if actions is not None and not isinstance(actions, ActionList):
            actions = ActionList(actions)
        return cls(name or cfg.get("RuleConfigurationName", rule), rule,
                   params, colls, actions.actions if actions else [])

    def to_config(self, stop_file=None):
        """This rule as one entry of the configuration's rules list."""
        d = {"name": self.name}
        if self.name != self.rule:
            d["rule"] = self.rule
        if self.rule_parameters:
            d["parameters"] = dict(self.rule_parameters)
        if self.actions:
            d["actions"] = [a.render(stop_file) for a in self.actions]
        return d


def rules_config(rules, stop_file=None):
    """{"rules": [...]}: the configuration's rules section."""
    names = set()
    out = []
    for r in rules:
        if not isinstance(r, Rule):
            raise ConfigError(f"rules must be Rule objects (Rule.sagemaker),"
                              f" not {r!r}", ["rules"])
        if r.name in names:
            raise ConfigError(f"two rules named {r.name!r}: give one a name="
                              , [f"rules.{r.name}"])
        names.add(r.name)
        out.append(r.to_config(stop_file))
    return {"rules": out}


def _yaml_scalar(v):
    # JSON strings and numbers are YAML flow scalars
    return json.dumps(v)


def rules_yaml(rules, stop_file=None):
    """The rules section as YAML text, ready to be the configuration file
    of `trainwatch run --config` (or appended to one without `rules:`).
    Parameter values are quoted strings, as the SDK sends them."""
    lines = ["rules:"]
    for entry in rules_config(rules, stop_file)["rules"]:
        lines.append(f"  - name: {_yaml_scalar(entry['name'])}")
        if "rule" in entry:
            lines.append(f"    rule: {_yaml_scalar(entry['rule'])}")
        if "parameters" in entry:
            lines.append("    parameters:")
            for k, v in entry["parameters"].items():
                lines.append(f"      {k}: {_yaml_scalar(v)}")
        if "actions" in entry:
            lines.append("    actions:")
            for a in entry["actions"]:
                first = True
                for k, v in a.items():
                    lead = "      - " if first else "        "
                    lines.append(f"{lead}{k}: {_yaml_scalar(v)}")
                    first = False
    return "\n".join(lines) + "\n"


def write_rules_yaml(path, rules, stop_file=None):
    with open(path, "w", encoding="utf-8") as f:
        f.write(rules_yaml(rules, stop_file))
    return path


def hook_config(rules, hook_parameters=None, collection_configs=(),
                **kwargs):
    """A DebuggerHookConfig saving what the rules ask for (their
    collections, then collection_configs), as the estimator merges them
    (a later config of the same name overrides the save settings)."""
    colls = [c for r in rules for c in r.collection_configs]
    colls += list(collection_configs)
    return DebuggerHookConfig(hook_parameters=hook_parameters,
                              collection_configs=colls, **kwargs)
