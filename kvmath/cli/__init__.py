"""Layer 8, the command line: one module per command group, each holding its parser, its run
and what it prints, over one scenario record (:func:`kvmath.scenario.build.scenario_of`):

* :mod:`~kvmath.cli.main`: the parser built from the groups', the dispatch, and the mapping of
  errors to one line and an exit status (the console script, :mod:`kvmath.entry`, runs it);
* :mod:`~kvmath.cli.compare`: reload against recompute for one scenario, with its bands;
* :mod:`~kvmath.cli.reuse`: whether an offload pays, at purchase and opportunity cost;
* :mod:`~kvmath.cli.tiers`: the node plan of a node's tiers for a load;
* :mod:`~kvmath.cli.listing`: ``kvmath list``, the bundled rows;
* :mod:`~kvmath.cli.trace`: a request trace's reuse, LRU curve and tier replay;
* :mod:`~kvmath.cli.route`: a trace routed over a fleet (``route``) and replayed on each of its
  nodes (``fleet``);
* :mod:`~kvmath.cli.review`: the design-review section of a scenario file, from the answers of
  compare, reuse, tiers and fleet run on it;
* :mod:`~kvmath.cli.reference`: the command reference the book prints, generated from the parser
  and the option declarations, and a command's output for the book's examples;
* :mod:`~kvmath.cli.output`: what every command prints, one JSON object or its human lines.
"""
