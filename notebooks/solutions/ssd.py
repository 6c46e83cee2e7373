"""Solution key to the SSD exercise (notebook 03). Try it yourself before you read on.

With every TensorRT rule on, the SSD partitions into 5 subgraphs and pruning keeps 1, the
backbone with all 73 convolutions. Switch ``tensorrt.nn.conv2d`` off and the convolutions stay
on the host: they cut the backbone into many small subgraphs of batch-norm arithmetic and relu
(more subgraphs), none of which holds a MAC op any more, so pruning returns every one (fewer).
"""

rule_off = "tensorrt.nn.conv2d"
partition_change = "more"
prune_change = "fewer"
