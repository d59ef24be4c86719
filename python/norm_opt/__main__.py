#===- __main__.py - python3 -m norm_opt -----------------------------------===#
import sys

from ._cli import main

sys.exit(main())
