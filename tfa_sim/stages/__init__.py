"""The kernel's four stages, one module each: what a stage reads, what it writes,
where it rounds (via the backend) and, for the timing model, what it costs.

* ``compute_qk``  (AIC): Q block · K sub-tiledᵀ → fp32 into the QK FIFO;
* ``compute_p``   (AIV): online softmax of a row slice → fp16 ``x_exp``, ``l1_exp_max``;
* ``compute_pv``  (AIC): P tile · V tile → fp32 into the PV FIFO;
* ``compute_gu``  (AIV): ``running_o`` update, final normalisation.
"""
