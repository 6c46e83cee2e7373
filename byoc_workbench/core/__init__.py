"""The ground floor: what every other floor may use, and which uses none of them.

IR walking and editing (``ir``, ``ir_edit``, ``ir_types``, ``transforms``), device placement
(``devices``), the one fence around TVM's private API (``tvm_private``), the one error type
(``errors``), printing (``text``, ``progress``), files and output paths (``files``,
``output_paths``) and a user's own Python file (``user_file``). docs/ARCHITECTURE.md says
what each one owns.
"""
