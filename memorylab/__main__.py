from .cli import main

if __name__ == "__main__":  # not when a worker process of ``memorylab audit`` imports it
    raise SystemExit(main())
