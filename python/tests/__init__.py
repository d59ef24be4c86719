#===- __init__.py - norm_opt's tests (standard library only) --------------===#
