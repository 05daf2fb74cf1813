"""Facts about the hardware, the models and vLLM: GPUs, EC2 instances, the model catalog, vLLM's flags and refusals."""
