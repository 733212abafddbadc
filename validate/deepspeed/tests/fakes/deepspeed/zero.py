"""deepspeed.zero.Init of the fake: records that the model was built inside it."""
ACTIVE = []


class Init:
    def __init__(self, module=None, config_dict_or_path=None, **kwargs):
        assert isinstance(config_dict_or_path, dict), "the harness passes the ds_config dict"
        self.config = config_dict_or_path

    def __enter__(self):
        ACTIVE.append(self)
        return self

    def __exit__(self, *exc):
        ACTIVE.pop()
        return False
